-- Rows quarantined as duplicates by the last dedupe, per file.
SELECT src_file, count(*) FROM dup_rows GROUP BY src_file ORDER BY src_file;
