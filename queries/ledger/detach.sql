-- Drop the temporary kv_events view over an external ledger, if this connection has one.
DROP VIEW IF EXISTS temp.main.kv_events;
