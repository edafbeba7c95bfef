-- exposure_tokens: docs/DESIGN.md §6 token exposures per (receiver request, node, leaker request): the
-- distinct slots of that pair on that node, whatever the kind or how often they were read.
-- A pair's exposure runs (one per kind and slot run; temp.analysis_exposure_runs, the rows of
-- the exposures table by request code) may overlap across kinds. In (start, count) order, each
-- run adds the slots it reaches beyond the furthest end of the runs before it (reach_before):
-- summed over the pair, the size of their union, in one window pass over integer codes. The
-- accounts are those of the pair's two requests, joined as the exposures table joins them.
DELETE FROM exposure_tokens;

INSERT INTO exposure_tokens BY NAME
WITH reach AS (
    SELECT receiver_code, node, leaker_code, slot_start, slot_start + slot_count AS slot_end,
           first_read_at, last_read_at,
           max(slot_start + slot_count) OVER (
               PARTITION BY receiver_code, node, leaker_code
               ORDER BY slot_start, slot_count ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
           ) AS reach_before
    FROM temp.analysis_exposure_runs
), pairs AS (
    SELECT receiver_code, node, leaker_code,
           sum(greatest(slot_end - greatest(slot_start, coalesce(reach_before, slot_start)), 0))
               AS tokens,
           min(first_read_at) AS first_read_at, max(last_read_at) AS last_read_at
    FROM reach
    GROUP BY receiver_code, node, leaker_code
)
SELECT rc.request_id AS receiver_request_id, p.node, lc.request_id AS leaker_request_id,
       p.tokens, p.first_read_at, p.last_read_at,
       rr.account_id AS receiver_account_id, lr.account_id AS leaker_account_id,
       rr.account_id <> lr.account_id AS cross_account
FROM pairs p
JOIN work.analysis_request_codes rc ON rc.req_code = p.receiver_code
JOIN work.analysis_request_codes lc ON lc.req_code = p.leaker_code
LEFT JOIN work.analysis_requests rr ON rr.request_id = rc.request_id
LEFT JOIN work.analysis_requests lr ON lr.request_id = lc.request_id
ORDER BY receiver_request_id, p.node, leaker_request_id;
