-- The keys of the events that a partition's pieces name (registered as _named_keys by
-- forensics.analysis.partitions: the events exposure pieces name, and those of violation
-- pieces, marked `violation` 1), for the view of only those events of an external ledger
-- (kv_named_events, queries/ledger/view.sql). A key named twice is kept twice: the view joins
-- the keys as a semi join, which repeats no event. In key order, so that the keys of a part
-- read by itself are one stretch of the table (queries/ledger/view_named_rows.sql).
CREATE OR REPLACE TEMP TABLE analysis_named_keys AS
SELECT event_key, violation <> 0 AS violation FROM _named_keys ORDER BY event_key;
