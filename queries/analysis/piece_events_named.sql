-- A partition task's events that its pieces name, read once from the view of only those events
-- (kv_named_events, queries/ledger/view.sql), so that only they are read in full and typed:
-- analysis_named_events for the exposure runs (forensics.analysis.runfacts), and of those the
-- events of violation pieces as analysis_piece_events (as queries/analysis/piece_events.sql
-- makes them from a whole ledger).
CREATE OR REPLACE TEMP TABLE analysis_named_events AS
SELECT input_order, ts, request_id, slot_start, pos_start, source FROM kv_named_events;

CREATE OR REPLACE TEMP TABLE analysis_piece_events AS
SELECT input_order AS event_key, ts, request_id, slot_start, pos_start, source
FROM temp.analysis_named_events
SEMI JOIN (SELECT event_key FROM temp.analysis_named_keys WHERE violation) v
    ON v.event_key = analysis_named_events.input_order;
