-- The sweep's output, appended node by node (forensics.analysis.order). Events are named by
-- their kv_events.input_order (*_key); codes as in forensics/analysis/codes.py; slots are real
-- slots, [slot_start, slot_end). Exposure pieces come folded into their runs, one row per run
-- (forensics.analysis.runfacts): the receiver's and leaker's request codes, the run's slots,
-- the leaker's positions, where its data came from and when it was read and written.
-- Temporary tables: only the analysis' own SQL reads them, within its connection, so they are
-- never written into the case database (nor are the copies older releases kept there).
CREATE SCHEMA IF NOT EXISTS work;  -- the analysis' working tables, apart from results
DROP TABLE IF EXISTS work.analysis_exposure_pieces;
DROP TABLE IF EXISTS temp.analysis_exposure_pieces;
DROP TABLE IF EXISTS work.analysis_violation_pieces;
DROP TABLE IF EXISTS work.analysis_read_counts;
DROP TABLE IF EXISTS work.analysis_piece_events;

CREATE OR REPLACE TEMP TABLE analysis_exposure_runs (
    node VARCHAR, receiver_code INTEGER, leaker_code INTEGER, kind_code TINYINT,
    slot_start BIGINT, slot_count BIGINT, leaker_pos_min BIGINT, leaker_pos_max BIGINT,
    prompt_source BOOLEAN,     -- a piece's write came from prefill or transfer
    generated_source BOOLEAN,  -- a piece's write came from decode
    by_position BIGINT,        -- pieces whose write gives another or no source
    by_position_lo BIGINT, by_position_hi BIGINT,  -- their positions (when by_position > 0)
    first_read_at TIMESTAMPTZ, last_read_at TIMESTAMPTZ,
    first_write_at TIMESTAMPTZ, last_write_at TIMESTAMPTZ
);
CREATE OR REPLACE TEMP TABLE analysis_violation_pieces (
    node VARCHAR, event_key BIGINT, violation_code TINYINT, other_code INTEGER,
    slot_start BIGINT, slot_end BIGINT
);
-- Per (node, reading request): reads, and the distinct slots its reads saw per category.
CREATE OR REPLACE TEMP TABLE analysis_read_counts (
    node VARCHAR, req_code INTEGER, reads BIGINT, own_slots BIGINT, shared_verified BIGINT,
    shared_unverified BIGINT, foreign_slots BIGINT, uninitialised_slots BIGINT
);
