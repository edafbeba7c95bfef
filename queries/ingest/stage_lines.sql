-- Read a JSON Lines file one whole line per row (JSON text cannot hold a raw \x01, so it is a safe
-- delimiter; a line that holds one does not parse and is quarantined).
DROP TABLE IF EXISTS kvf_rejects;
DROP TABLE IF EXISTS kvf_reject_scans;
CREATE OR REPLACE TEMP TABLE raw_rows AS
SELECT line FROM read_csv(
    $path, columns = {'line': 'VARCHAR'}, header = false, delim = chr(1), quote = '',
    escape = '', auto_detect = false, compression = $compression, store_rejects = true,
    rejects_table = 'kvf_rejects', rejects_scan = 'kvf_reject_scans',
    max_line_size = 67108864, buffer_size = 134217728,
    hive_partitioning = false  -- a node=X/ folder name never replaces a row's own value
);
