-- While ingest writes the case's inputs, DuckDB does not try FSST string compression: on the
-- ledger's text columns (request ids, content hashes, node, op) it is analysed for every segment
-- and not chosen, and that analysis alone is about a fifth of writing the events (the file is the
-- same size without it). Any DuckDB release reads the database either way.
SET disabled_compression_methods = 'fsst';
