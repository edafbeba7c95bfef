-- The scan floor: read and hash every column of every kv_events Parquet file ($pattern may
-- reach into node=NAME/ folders; no column is taken from a folder name).
SELECT count(*), sum(hash(COLUMNS(*)) % 1000)
FROM read_parquet($pattern, hive_partitioning = false);
