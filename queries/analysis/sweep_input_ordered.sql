-- One node's events for the sweep (queries/analysis/sweep_input.sql, nested as {query}) sorted
-- into their total order, for a node whose events DuckDB produced out of order.
SELECT * FROM ({query}) ORDER BY rank, event_key
