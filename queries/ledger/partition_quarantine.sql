-- The quarantined rows of the parts of one partition ($files: their names as recorded), for the
-- task that reads that partition.
SELECT * FROM quarantine WHERE table_name = 'kv_events' AND list_contains($files, file);
