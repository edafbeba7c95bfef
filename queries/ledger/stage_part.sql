-- One part of an external ledger as the temp relation staged (as ingest/stage_parquet_rows.sql does
-- for a loaded file), read without hive partitioning: the node column is the row's own value,
-- not the folder name, so that a row in the wrong folder can be found. {path}: a quoted literal.
CREATE OR REPLACE TEMP VIEW staged AS
SELECT file_row_number + 1 AS src_row, NULL::VARCHAR AS parse_error, NULL::VARCHAR AS raw,
       {projection}
FROM read_parquet({path}, file_row_number = true, hive_partitioning = false);
