-- Parquet rows as they are typed (the validation macros accept typed values), read in place.
-- {path} is the file's path as a quoted SQL literal (a view cannot hold a parameter).
CREATE OR REPLACE TEMP VIEW staged AS
SELECT file_row_number + 1 AS src_row, NULL::VARCHAR AS parse_error, NULL::VARCHAR AS raw,
       {projection}
FROM read_parquet({path}, file_row_number = true, hive_partitioning = false);
