-- Read one CSV file as text, keeping rows that do not parse in kvf_rejects. The columns are the
-- header's own names (read and checked before; no sniffing, so no line is ever taken
-- for a comment or a second header).
DROP TABLE IF EXISTS kvf_rejects;
DROP TABLE IF EXISTS kvf_reject_scans;
CREATE OR REPLACE TEMP TABLE raw_rows AS
SELECT * FROM read_csv(
    $path, columns = $columns, auto_detect = false, header = true, delim = ',', quote = '"',
    escape = '"', comment = '', compression = $compression, store_rejects = true,
    rejects_table = 'kvf_rejects', rejects_scan = 'kvf_reject_scans', max_line_size = 67108864,
    buffer_size = 134217728, null_padding = false, strict_mode = true,
    hive_partitioning = false  -- a node=X/ folder name never replaces a row's own value
);
