-- Requests answered 200 whose prompt is longer than the KV pool of the node that prefilled it
-- (the prefill node, else the single node, else the decode node). $1: how many to list.
WITH pools AS (
    SELECT node, min(pool_slots) AS pool_slots
    FROM (SELECT node, pool_slots FROM nodes UNION ALL SELECT node, pool_slots FROM node_starts)
    GROUP BY node
),
over AS (
    SELECT r.request_id, r.account_id, r.prompt_tokens, r.http_status,
           coalesce(r.prefill_node, r.node, r.decode_node) AS serving_node, p.pool_slots,
           epoch_ms(r.first_token_at) - epoch_ms(r.received_at) AS ttft_ms, r.received_at
    FROM requests r
    JOIN pools p ON p.node = coalesce(r.prefill_node, r.node, r.decode_node)
    WHERE r.http_status = 200 AND r.prompt_tokens > p.pool_slots
)
SELECT *, count(*) OVER () AS total
FROM over
ORDER BY prompt_tokens DESC, request_id
LIMIT $1;
