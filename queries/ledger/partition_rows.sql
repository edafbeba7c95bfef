-- The rows ingest kept of a partition's parts ($files: their names in input_files): what its
-- task will sweep, for the analysis' memory budget (forensics.analysis.budget).
SELECT coalesce(sum(rows_loaded), 0)
FROM input_files
WHERE path IN (SELECT unnest($files::VARCHAR[]));
