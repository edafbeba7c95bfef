-- Columns not in the contract: one warning per table and column, on the first file that has it
-- (the reason says how many do). Row i of the warning is $tables[i], $files[i], $columns[i],
-- $reasons[i].
INSERT INTO ingest_warnings (table_name, file, "row", "column", "value", reason)
SELECT * FROM (
    SELECT unnest($tables::VARCHAR[]) AS table_name, unnest($files::VARCHAR[]) AS file,
           NULL::BIGINT, unnest($columns::VARCHAR[]) AS "column", NULL::VARCHAR,
           unnest($reasons::VARCHAR[]) AS reason
)
ORDER BY table_name, "column";
