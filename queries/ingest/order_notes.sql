-- The warnings that change how the analysis orders a node's events (partial seq), for the run
-- summary and the report.
SELECT reason FROM ingest_warnings WHERE table_name = 'kv_events' AND "column" = 'seq'
ORDER BY "value";
