-- The TEMP tables of the connection (stand-ins already made), by name.
SELECT table_name FROM duckdb_tables() WHERE temporary ORDER BY table_name;
