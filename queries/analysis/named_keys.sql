-- The keys of the events that a partition's pieces name (reads and writes of exposure pieces,
-- events of violation pieces), for the view of only those events of an external ledger
-- (kv_named_events, queries/ledger/view.sql; forensics.analysis.partitions). Repeats are kept:
-- the view joins them as a semi join, which repeats no event.
CREATE OR REPLACE TEMP TABLE analysis_named_keys AS
SELECT read_key AS event_key FROM temp.analysis_exposure_pieces
UNION ALL SELECT write_key FROM temp.analysis_exposure_pieces
UNION ALL SELECT event_key FROM temp.analysis_violation_pieces;
