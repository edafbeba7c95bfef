-- The ledger events that the violation pieces of the sweep name, with the columns the
-- violations query uses: a small table, so that it joins this instead of the whole ledger,
-- which is read here once. (For a ledger kept outside the database, the partition tasks return
-- these rows instead. Exposure runs get the columns of their events node by node:
-- queries/analysis/exposure_events.sql.) Temporary, like the pieces
-- (queries/analysis/pieces_create.sql). A semi join on the keys as they come: the same event
-- may be named many times.
CREATE OR REPLACE TEMP TABLE analysis_piece_events AS
SELECT input_order AS event_key, ts, request_id, slot_start, pos_start, source
FROM kv_events
SEMI JOIN temp.analysis_violation_pieces named ON named.event_key = kv_events.input_order;
