-- Back to DuckDB's own compression choices once the inputs are written (queries/ingest/settings.sql).
RESET disabled_compression_methods;
