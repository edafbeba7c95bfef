-- fuzz_ingest: rows of one input file in quarantine.
SELECT count(*) FROM quarantine WHERE file = $p;
