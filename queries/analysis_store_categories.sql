-- Store the sweep's categories pieces (registered by forensics.analysis.order as _analysis_pieces).
CREATE OR REPLACE TABLE analysis_read_pieces AS SELECT * FROM _analysis_pieces;
