-- exposure_tokens: docs/DESIGN.md §6 token exposures per (receiver request, node, leaker request): the
-- distinct slots of that pair on that node, whatever the kind or how often they were read.
-- A pair's exposure runs (one per kind and slot run) may overlap across kinds. In (start, count)
-- order, each run adds the slots it reaches beyond the furthest end of the runs before it
-- (reach_before): summed over the pair, the size of their union, in one window pass. The
-- accounts are those of the pair's two requests, the same on every row of the pair.
DELETE FROM exposure_tokens;

INSERT INTO exposure_tokens BY NAME
WITH reach AS (
    SELECT receiver_request_id, node, leaker_request_id, slot_start,
           slot_start + slot_count AS slot_end, first_read_at, last_read_at,
           receiver_account_id, leaker_account_id, cross_account,
           max(slot_start + slot_count) OVER (
               PARTITION BY receiver_request_id, node, leaker_request_id
               ORDER BY slot_start, slot_count ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
           ) AS reach_before
    FROM exposures
)
SELECT receiver_request_id, node, leaker_request_id,
       sum(greatest(slot_end - greatest(slot_start, coalesce(reach_before, slot_start)), 0))
           AS tokens,
       min(first_read_at) AS first_read_at, max(last_read_at) AS last_read_at,
       min(receiver_account_id) AS receiver_account_id,
       min(leaker_account_id) AS leaker_account_id, min(cross_account) AS cross_account
FROM reach
GROUP BY receiver_request_id, node, leaker_request_id
ORDER BY receiver_request_id, node, leaker_request_id;
