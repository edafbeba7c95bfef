-- Store the sweep's violations pieces (registered by forensics.analysis.order as _analysis_pieces).
CREATE OR REPLACE TABLE analysis_violation_pieces AS SELECT * FROM _analysis_pieces;
