-- One row per request id (the first in file order when the log repeats an id), with the nodes
-- that served it: the prefill node (or the single node) and the decode node (or the single node).
--
-- A request whose row names no node at all is taken as served by the case's one engine node
-- where there is exactly one: the nodes file, the engine logs (both in `nodes`) and the request
-- log together name a single node, no row calls it a prefill or decode half, and no KV ledger
-- is loaded ($ledger_loaded: a ledger names its requests' nodes itself). That node is written
-- into `node` (queries/figures/headline.sql counts these requests: sole_node_requests). With
-- two nodes or more, or none, nothing is inferred and the request's serving node stays unknown.
CREATE SCHEMA IF NOT EXISTS work;  -- the analysis' working tables, apart from results

CREATE OR REPLACE TABLE work.analysis_requests AS
WITH named AS (
    SELECT node, role FROM nodes
    UNION ALL SELECT prefill_node, NULL FROM requests
    UNION ALL SELECT decode_node, NULL FROM requests
    UNION ALL SELECT node, NULL FROM requests
), sole AS (
    SELECT min(node) AS sole_node FROM named
    WHERE node IS NOT NULL
    HAVING count(DISTINCT node) = 1
       AND bool_and(coalesce(lower(role), 'unified') = 'unified')
       AND NOT $ledger_loaded
), logged AS (
    SELECT r.* REPLACE (
               CASE WHEN r.prefill_node IS NULL AND r.decode_node IS NULL AND r.node IS NULL
                    THEN s.sole_node ELSE r.node END AS node)
    FROM requests r LEFT JOIN sole s ON true
)
SELECT *,
       coalesce(prefill_node, node) AS serving_prefill_node,
       coalesce(decode_node, node, prefill_node) AS serving_decode_node
FROM logged
QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY src_file, src_row) = 1;
