-- A partition task's events of violation pieces, as analysis_piece_events (as
-- queries/analysis/piece_events.sql makes them from a whole ledger), read from the view of the
-- named events (kv_named_events, queries/ledger/view.sql) once the named keys are only those of
-- violation pieces: the exposure pieces' events were read before
-- (queries/analysis/named_event_facts.sql), and only these are read here in full.
DELETE FROM temp.analysis_named_keys WHERE NOT violation;

CREATE OR REPLACE TEMP TABLE analysis_piece_events AS
SELECT input_order AS event_key, ts, request_id, slot_start, pos_start, source
FROM kv_named_events;
