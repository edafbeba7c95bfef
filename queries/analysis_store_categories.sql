-- Append one node's categories pieces (registered by forensics.analysis.order as _analysis_pieces).
INSERT INTO analysis_read_pieces SELECT * FROM _analysis_pieces;
