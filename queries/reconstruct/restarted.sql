-- Whether node $node's engine may have started again while serving its requests: its logs show
-- more than one start, and one after the first of them was received and before the last
-- completed, or one whose time the log does not give (vLLM writes no year, so its starts stay
-- undated). A restart makes a new pool: a page trace run across it as one pool is not the
-- engine's, and reconstruction does not rebuild such a node.
WITH served AS (
    SELECT min(received_at) AS first_at,
           max(coalesce(completed_at, first_token_at, received_at)) AS last_at
    FROM work.analysis_requests
    WHERE serving_prefill_node = $node OR serving_decode_node = $node
)
SELECT count(*) > 1
       AND (count(*) FILTER (WHERE s.started_at IS NULL) > 0
            OR count(*) FILTER (WHERE s.started_at > v.first_at
                                  AND s.started_at < v.last_at) > 0)
FROM node_starts s, served v
WHERE s.node = $node
