-- The case database's own kv_events table, which an external ledger's view replaces.
DROP TABLE main.kv_events;
