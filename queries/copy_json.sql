-- Write a query's rows as one JSON array of objects. The placeholder in parentheses is replaced
-- by the text of a query in queries/; $path is the file.
COPY (__QUERY__) TO $path (FORMAT json, ARRAY true);
