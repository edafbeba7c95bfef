-- The case database's own tables and views (not the TEMP ones), with their comments.
SELECT schema_name, table_name, comment, false AS is_view
FROM duckdb_tables()
WHERE database_name = current_database() AND NOT temporary
UNION ALL
SELECT schema_name, view_name, comment, true
FROM duckdb_views()
WHERE database_name = current_database() AND NOT temporary AND NOT internal
ORDER BY schema_name, table_name;
