-- The file of the connection's own database (NULL for an in-memory one): an in-memory helper
-- connection working for this case database spills beside it (forensics.casedb.dbopen).
SELECT path FROM duckdb_databases() WHERE database_name = current_database();
