-- One staged row per Parquet row (typed values rendered as text the validation understands:
-- timestamps as epoch microseconds, lists as JSON arrays).
CREATE OR REPLACE TEMP TABLE staged AS
SELECT file_row_number + 1 AS src_row, NULL::VARCHAR AS parse_error, NULL::VARCHAR AS raw,
       {projection}
FROM read_parquet($path, file_row_number = true);
