-- ledger_holes for a ledger kept outside the database: its parts are read once, by the
-- analysis' tasks, so its seq numbering is not scanned again here (node_evidence says so);
-- the tap's own reports still give holes (queries/analysis/ledger_holes_tap.sql).
DELETE FROM ledger_holes;

CREATE OR REPLACE TEMP TABLE analysis_seq_runs (
    node VARCHAR, run BIGINT, events BIGINT, lo BIGINT, hi BIGINT
);
