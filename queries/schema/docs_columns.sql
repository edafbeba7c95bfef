-- Every column of the case database's own tables (main and work schemas) with its comment, for
-- apply_comments.
SELECT schema_name, table_name, column_name, comment
FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name IN ('main', 'work') AND NOT internal
ORDER BY schema_name, table_name, column_index;
