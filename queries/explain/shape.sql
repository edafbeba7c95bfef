-- The columns, in order, of a TEMP table made from the current schema ($table).
SELECT column_name
FROM duckdb_columns()
WHERE database_name = 'temp' AND table_name = $table
ORDER BY column_index;
