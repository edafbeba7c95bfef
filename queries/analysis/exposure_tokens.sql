-- exposure_tokens: docs/DESIGN.md §6 token exposures per (receiver request, node, leaker request): the
-- distinct slots of that pair on that node, whatever the kind or how often they were read.
DELETE FROM exposure_tokens;

INSERT INTO exposure_tokens BY NAME
WITH reach AS (
    SELECT *, max(slot_start + slot_count) OVER (
        PARTITION BY receiver_request_id, node, leaker_request_id
        ORDER BY slot_start, slot_count ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS reach_before
    FROM exposures
), island AS (
    SELECT *, sum(CASE WHEN reach_before IS NULL OR slot_start > reach_before THEN 1 ELSE 0 END)
        OVER (PARTITION BY receiver_request_id, node, leaker_request_id
              ORDER BY slot_start, slot_count ROWS UNBOUNDED PRECEDING) AS run_no
    FROM reach
), runs AS (
    SELECT receiver_request_id, node, leaker_request_id,
           max(slot_start + slot_count) - min(slot_start) AS tokens,
           min(first_read_at) AS first_read_at, max(last_read_at) AS last_read_at
    FROM island GROUP BY receiver_request_id, node, leaker_request_id, run_no
), pair AS (
    SELECT receiver_request_id, node, leaker_request_id, sum(tokens) AS tokens,
           min(first_read_at) AS first_read_at, max(last_read_at) AS last_read_at
    FROM runs GROUP BY receiver_request_id, node, leaker_request_id
), accounts AS (
    SELECT DISTINCT receiver_request_id, node, leaker_request_id, receiver_account_id,
           leaker_account_id, cross_account
    FROM exposures
)
SELECT pair.*, a.receiver_account_id, a.leaker_account_id, a.cross_account
FROM pair JOIN accounts a USING (receiver_request_id, node, leaker_request_id)
ORDER BY receiver_request_id, node, leaker_request_id;
