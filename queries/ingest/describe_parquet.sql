-- Column names and types of a Parquet file.
SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet($path, hive_partitioning = false));
