-- Read one CSV file as text, keeping rows that do not parse in kvf_rejects.
DROP TABLE IF EXISTS kvf_rejects;
DROP TABLE IF EXISTS kvf_reject_scans;
CREATE OR REPLACE TEMP TABLE raw_rows AS
SELECT * FROM read_csv(
    $path, all_varchar = true, header = true, delim = ',', quote = '"', escape = '"',
    compression = $compression, store_rejects = true, rejects_table = 'kvf_rejects',
    rejects_scan = 'kvf_reject_scans', max_line_size = 67108864, buffer_size = 134217728,
    null_padding = false, strict_mode = true
);
