-- Write a query's rows as JSON Lines (one object per line). The placeholder in parentheses is
-- replaced by the text of a query in queries/; $path is the file.
COPY (__QUERY__) TO $path (FORMAT json);
