-- The rows each Parquet file holds, from its footer ($paths: the files; an external ledger's
-- parts, or the small parts ingest loads together).
SELECT file_name, num_rows FROM parquet_file_metadata($paths);
