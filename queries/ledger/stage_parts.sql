-- Parts of an external ledger (one node's, all of one schema) as the temp relation staged (as
-- ingest/stage_parquet_rows.sql does for a loaded file), read in one scan without hive
-- partitioning: the node column is the row's own value, not the folder name, so that a row in
-- the wrong folder can be found. src_row is the row's event key, its part's rank * 2^40 + its
-- row ({paths} in rank order, the first's rank {rank}, the others' following on); the checks,
-- run with a file_rank of 0, then give each row the input_order a loaded ledger gives it.
CREATE OR REPLACE TEMP VIEW staged AS
SELECT ({rank} + file_index::BIGINT) * 1099511627776 + file_row_number + 1 AS src_row,
       NULL::VARCHAR AS parse_error, NULL::VARCHAR AS raw, {projection}
FROM read_parquet({paths}, file_row_number = true, hive_partitioning = false);
