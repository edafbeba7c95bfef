-- The scan floor: read and hash every column of every kv_events Parquet file.
SELECT count(*), sum(hash(COLUMNS(*)) % 1000)
FROM read_parquet($pattern);
