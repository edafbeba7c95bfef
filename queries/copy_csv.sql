-- Write a query's rows as CSV (header, comma, '"' quoting where needed, NULL as an empty cell).
-- The placeholder in parentheses is replaced by the text of a query in queries/; $path is the
-- file.
COPY (__QUERY__) TO $path (FORMAT csv, HEADER true, DELIMITER ',', QUOTE '"', NULLSTR '');
