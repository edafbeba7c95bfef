-- Node pools for the partition checks of an external ledger (ingest/validate_kv_events.sql reads them).
SELECT node, pool_slots FROM nodes;
