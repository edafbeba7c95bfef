-- The case database's own kv_events table (if any), which an external ledger's view replaces.
DROP TABLE IF EXISTS main.kv_events;
