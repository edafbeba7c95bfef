-- Column names and types of one part of an external ledger (no columns from folder names).
SELECT column_name, column_type
FROM (DESCRIBE SELECT * FROM read_parquet($path, hive_partitioning = false));
