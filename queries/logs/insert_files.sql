INSERT INTO log_files (path, node, engine, sha256, bytes, lines, parsed, truncated, ignored)
SELECT path, node, engine, sha256, bytes, lines, parsed, truncated, ignored
FROM logs_files_in
ORDER BY path;
