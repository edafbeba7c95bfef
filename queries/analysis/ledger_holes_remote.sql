-- ledger_holes for a ledger read in place from a remote store (an s3:// or other URL): each
-- part is fetched once, by the analysis' tasks, so its seq numbering is not scanned again here
-- (node_evidence says so); the tap's own reports still give holes
-- (queries/analysis/ledger_holes_tap.sql). A ledger read in place from a folder is scanned as
-- a loaded one is (queries/analysis/ledger_holes.sql).
DELETE FROM ledger_holes;

CREATE OR REPLACE TEMP TABLE analysis_seq_runs (
    node VARCHAR, run BIGINT, events BIGINT, lo BIGINT, hi BIGINT
);
