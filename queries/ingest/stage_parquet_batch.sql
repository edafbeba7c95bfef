-- Consecutive Parquet files of one schema staged as one relation, read in one scan
-- (forensics.ingest.batched): as ingest/stage_parquet_rows.sql does for one file, but src_row is
-- the row's file rank * 2^40 + its row ({paths} in rank order, the first's rank {rank}, the
-- others' following on). The checks, run with a file_rank of 0, then give each row the
-- input_order a file loaded alone gets; insert_batch.sql splits src_row back into the file's
-- name and its row.
CREATE OR REPLACE TEMP VIEW staged AS
SELECT ({rank} + file_index::BIGINT) * 1099511627776 + file_row_number + 1 AS src_row,
       NULL::VARCHAR AS parse_error, NULL::VARCHAR AS raw, {projection}
FROM read_parquet({paths}, file_row_number = true, hive_partitioning = false);
