-- The permanent tables of the case database (not the TEMP stand-ins).
SELECT table_name
FROM duckdb_tables()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT temporary
ORDER BY table_name;
