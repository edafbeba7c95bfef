-- The columns of a table of the case database itself ($table), in order (not a TEMP one).
SELECT column_name
FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main' AND table_name = $table
ORDER BY column_index;
