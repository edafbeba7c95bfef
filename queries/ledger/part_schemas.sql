-- The Parquet schema elements of the parts $paths, each with the DuckDB type it is read as, in
-- each part's schema order (forensics.ledger.external.schemas_of takes the top-level ones).
SELECT file_name, name, duckdb_type, num_children FROM parquet_schema($paths);
