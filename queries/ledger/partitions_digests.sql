-- What ingest recorded of the external ledger's parts ($files: their names in input_files):
-- each part's SHA-256 and size, which its analysis task checks against the part it reads, and
-- the rows it kept, which the task will sweep (the analysis' memory budget,
-- forensics.analysis.budget).
SELECT path, sha256, bytes, rows_loaded
FROM input_files
WHERE path IN (SELECT unnest($files::VARCHAR[]))
ORDER BY path;
