-- The rows each part of an external ledger holds, from its Parquet footer ($paths: the parts).
SELECT file_name, num_rows FROM parquet_file_metadata($paths);
