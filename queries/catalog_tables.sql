-- Persistent (non-temporary) tables of the case database.
SELECT table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY table_name;
