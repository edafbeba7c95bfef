-- Consecutive Parquet files of one schema staged as one relation, read in one scan without hive
-- partitioning (as ingest/stage_parquet_rows.sql does for one file): the small ledger parts
-- ingest loads together (forensics.ingest.batched), and an external ledger's parts in its
-- checks (forensics.ledger.check), where the node column is the row's own value, not the
-- folder name, so that a row in the wrong folder can be found. src_row is the row's event key,
-- its file's rank * 2^40 + its row ({paths} in rank order, the first's rank {rank}, the others'
-- following on); the checks, run with a file_rank of 0, then give each row the input_order a
-- file loaded alone gets, and kvf_of_part finds its file again.
CREATE OR REPLACE TEMP VIEW staged AS
SELECT ({rank} + file_index::BIGINT) * 1099511627776 + file_row_number + 1 AS src_row,
       NULL::VARCHAR AS parse_error, NULL::VARCHAR AS raw, {projection}
FROM read_parquet({paths}, file_row_number = true, hive_partitioning = false);
