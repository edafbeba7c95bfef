-- Append one node's violations pieces (registered by forensics.analysis.order as _analysis_pieces).
INSERT INTO analysis_violation_pieces SELECT * FROM _analysis_pieces;
