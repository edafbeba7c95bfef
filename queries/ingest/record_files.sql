-- Record the files an ingest read (registered as _files: forensics.case.result.FileCounts),
-- in one statement whatever their number (an external ledger can have tens of thousands of
-- parts).
INSERT INTO input_files
SELECT path, "table", sha256, bytes, rows_read, rows_loaded, rows_quarantined FROM _files;
