-- Columns of the raw CSV just read.
SELECT column_name FROM (DESCRIBE raw_rows);
