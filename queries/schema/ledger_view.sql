-- Whether the case database's own kv_events is a view (that of a ledger kept outside the case):
-- a row if it is.
SELECT 1 FROM duckdb_views() WHERE schema_name = 'main' AND view_name = 'kv_events' AND NOT temporary;
