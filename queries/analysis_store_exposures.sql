-- Append one node's exposures pieces (registered by forensics.analysis.order as _analysis_pieces).
INSERT INTO analysis_exposure_pieces SELECT * FROM _analysis_pieces;
