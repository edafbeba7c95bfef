-- Persistent (non-temporary) tables of the case database's main schema (the analysis' working
-- tables live in the schema `work`).
SELECT table_name FROM duckdb_tables() WHERE NOT temporary AND schema_name = 'main'
ORDER BY table_name;
