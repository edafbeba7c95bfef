-- A partition task's analysis_piece_events (as queries/analysis/piece_events.sql makes them
-- from a whole ledger: the events of violation pieces) from the view of only the events its
-- pieces name (kv_named_events, queries/ledger/view.sql), so that only those events are read in
-- full and typed.
CREATE OR REPLACE TEMP TABLE analysis_piece_events AS
SELECT input_order AS event_key, ts, request_id, slot_start, pos_start, source
FROM kv_named_events
SEMI JOIN (SELECT event_key FROM temp.analysis_named_keys WHERE violation) v
    ON v.event_key = kv_named_events.input_order;
