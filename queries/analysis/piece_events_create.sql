-- Empty analysis_piece_events, filled by the partition tasks of an external ledger (the same
-- columns as queries/analysis/piece_events.sql makes from kv_events).
CREATE OR REPLACE TEMP TABLE analysis_piece_events (
    event_key BIGINT, ts TIMESTAMPTZ, request_id VARCHAR, slot_start BIGINT, pos_start BIGINT,
    source VARCHAR
);
