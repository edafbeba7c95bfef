-- Which requests a partition's ledger names (queries/analysis/request_nodes.sql for a partition
-- task, whose events are all of one node, $node): the distinct request ids alone, the node
-- added to each. Hashing the node's name beside every row's request id, as the pass over a
-- whole ledger must, doubles the cost of the pass.
CREATE OR REPLACE TEMP TABLE analysis_request_nodes AS
SELECT request_id, CAST($node AS VARCHAR) AS node
FROM (SELECT DISTINCT request_id FROM kv_events);
