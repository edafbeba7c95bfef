-- What ingest recorded of a partition's parts ($files: their names in input_files): each part's
-- SHA-256 and size, which its analysis task checks against the part it reads.
SELECT path, sha256, bytes
FROM input_files
WHERE path IN (SELECT unnest($files::VARCHAR[]))
ORDER BY path;
