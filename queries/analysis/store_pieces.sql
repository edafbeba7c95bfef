-- Append one node's sweep output (registered by forensics.analysis.order as _analysis_pieces)
-- to {table}, one of the tables of analysis/pieces_create.sql.
INSERT INTO {table} BY NAME SELECT * FROM _analysis_pieces;
