-- Every value of every column of Parquet files read ($path: a file, or a pattern that may reach
-- into node=NAME/ folders; no column is taken from a folder name). A file whose pages are
-- damaged fails here where its footer alone reads (forensics.ingest.batched names it so); over
-- a ledger's parts it is the bench's scan floor, the least any analysis reads.
SELECT count(*), sum(hash(COLUMNS(*)) % 1000) FROM read_parquet($path, hive_partitioning = false);
