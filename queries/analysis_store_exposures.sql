-- Store the sweep's exposures pieces (registered by forensics.analysis.order as _analysis_pieces).
CREATE OR REPLACE TABLE analysis_exposure_pieces AS SELECT * FROM _analysis_pieces;
