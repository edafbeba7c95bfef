-- Per table and column seen: how many files have it, the first of them, and that file's columns
-- (for a suggestion among the contract's columns it lacks).
WITH per_column AS (
    SELECT table_name, "column", count(DISTINCT file) AS files, min(file) AS first_file
    FROM temp.ingest_columns
    GROUP BY table_name, "column"
)
SELECT p.table_name, p."column", p.files, p.first_file,
       list(DISTINCT c."column" ORDER BY c."column") AS first_file_columns
FROM per_column p
JOIN temp.ingest_columns c ON c.table_name = p.table_name AND c.file = p.first_file
GROUP BY p.table_name, p."column", p.files, p.first_file
ORDER BY p.table_name, p."column";
