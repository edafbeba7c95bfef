-- The warnings the run summary and the report repeat, as they change what the analysis sees:
-- a node whose events are ordered by ts (seq on some rows only), and a column not in the
-- contract, which was not loaded (no row and no value: forensics.ingest.columns).
SELECT reason FROM ingest_warnings
WHERE (table_name = 'kv_events' AND "column" = 'seq')
   OR ("row" IS NULL AND "value" IS NULL)
ORDER BY "value" IS NULL, "value", table_name, "column", reason;
