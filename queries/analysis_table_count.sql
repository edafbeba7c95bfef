-- How many tables (temporary or not) have this name.
SELECT count(*) FROM duckdb_tables() WHERE table_name = $name;
