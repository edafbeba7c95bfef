-- Every value of every column of one Parquet file read ($path): a file whose pages are damaged
-- fails here, where its footer alone reads (forensics.ingest.batched names it so).
SELECT count(*), sum(hash(COLUMNS(*)) % 1000) FROM read_parquet($path, hive_partitioning = false);
