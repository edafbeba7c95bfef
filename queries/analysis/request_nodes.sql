-- Which requests each node's ledger names (screening: a request its decode node's ledger logs
-- is covered by the ledger). Made in the analysis' pass that codes the requests
-- (queries/analysis/codes.sql), so that no later step scans the ledger for it.
-- A temporary table: made anew by each analysis, gone with the connection.
CREATE OR REPLACE TEMP TABLE analysis_request_nodes AS
SELECT DISTINCT request_id, node FROM kv_events;
