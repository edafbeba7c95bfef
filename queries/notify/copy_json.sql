-- Write a query's rows as one JSON array of objects.
-- {query}: the text of a query in queries/ (forensics.casedb.sql.nested); $path: the file.
COPY ({query}) TO $path (FORMAT json, ARRAY true);
