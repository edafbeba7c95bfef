-- Rows read from the staged file (Parquet: from its footer, without reading the rows).
SELECT count(*) AS rows_read FROM staged;
