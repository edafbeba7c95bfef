-- The write floor: every column of every kv_events Parquet file read and written as it is into a
-- table of a new database file, in the storage format a case database gets ($pattern as $path
-- in ingest/read_parquet_whole.sql). No checks and none of the columns ingest adds: the least a
-- loaded ledger costs.
CREATE TABLE ledger AS SELECT * FROM read_parquet($pattern, hive_partitioning = false);
CHECKPOINT;
