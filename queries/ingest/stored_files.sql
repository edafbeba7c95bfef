SELECT path, table_name, sha256, bytes, rows_read, rows_loaded, rows_quarantined
FROM input_files ORDER BY path;
