-- One row per request id (the first in file order when the log repeats an id), with the nodes
-- that served it: the prefill node (or the single node) and the decode node (or the single node).
CREATE SCHEMA IF NOT EXISTS work;  -- the analysis' working tables, apart from results

CREATE OR REPLACE TABLE work.analysis_requests AS
SELECT *,
       coalesce(prefill_node, node) AS serving_prefill_node,
       coalesce(decode_node, node, prefill_node) AS serving_decode_node
FROM requests
QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY src_file, src_row) = 1;
