-- The ledger events that the pieces of the sweep name (reads and writes of exposure pieces, events
-- of violation pieces), with the columns the exposures and violations queries use: a small
-- table, so that those queries join it instead of the whole ledger, which is read here once.
-- (For a ledger kept outside the database and swept by Ray tasks, the tasks return these rows
-- instead.) Temporary, like the pieces (queries/analysis/pieces_create.sql). A semi join on the
-- keys as they come: a long-context ledger's pieces name the same events many times, and
-- removing those repeats first (a UNION) cost more than the join does with them.
CREATE OR REPLACE TEMP TABLE analysis_piece_events AS
SELECT input_order AS event_key, ts, request_id, slot_start, pos_start, source
FROM kv_events
SEMI JOIN (
    SELECT read_key AS event_key FROM temp.analysis_exposure_pieces
    UNION ALL SELECT write_key FROM temp.analysis_exposure_pieces
    UNION ALL SELECT event_key FROM temp.analysis_violation_pieces
) named ON named.event_key = kv_events.input_order;
