-- Write a query's rows as JSON Lines (one object per line).
-- {query}: the text of a query in queries/ (forensics.casedb.sql.nested); $path: the file.
COPY ({query}) TO $path (FORMAT json);
