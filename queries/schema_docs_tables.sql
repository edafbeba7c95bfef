-- The case database's own tables (main and work schemas) with their comments.
SELECT schema_name, table_name, comment
FROM duckdb_tables()
WHERE database_name = current_database() AND schema_name IN ('main', 'work') AND NOT temporary
ORDER BY schema_name, table_name;
