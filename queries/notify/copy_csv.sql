-- Write a query's rows as CSV (header, comma, '"' quoting where needed, NULL as an empty cell).
-- {query}: the text of a query in queries/ (forensics.casedb.sql.nested); $path: the file.
COPY ({query}) TO $path (FORMAT csv, HEADER true, DELIMITER ',', QUOTE '"', NULLSTR '');
