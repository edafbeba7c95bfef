-- The quarantined rows of one partition's parts ($files: their names as recorded), for the
-- task that reads that partition.
SELECT * FROM quarantine WHERE table_name = 'kv_events' AND list_contains($files, file);
