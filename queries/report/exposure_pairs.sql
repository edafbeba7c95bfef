-- TEMP view: one row per (receiver request, leaker request, node) with the exact number of token
-- exposures (docs/DESIGN.md §6: distinct slots), merging overlapping slot runs of different kinds
-- without exploding them into slots.
CREATE OR REPLACE TEMP VIEW report_exposure_pairs AS
WITH runs AS (
    SELECT receiver_request_id AS r, leaker_request_id AS w, node,
           receiver_account_id, leaker_account_id, cross_account, confidence,
           slot_start AS s, slot_start + slot_count AS e, first_read_at, last_read_at
    FROM exposures
),
ordered AS (
    SELECT *, max(e) OVER (PARTITION BY r, w, node ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM runs
),
grouped AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR s > prev_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY r, w, node ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS grp
    FROM ordered
),
merged AS (
    SELECT r, w, node, grp, max(e) - min(s) AS tokens FROM grouped GROUP BY r, w, node, grp
),
pair_tokens AS (
    SELECT r, w, node, sum(tokens) AS tokens FROM merged GROUP BY r, w, node
),
pairs AS (
    SELECT r, w, node,
           any_value(receiver_account_id) AS receiver_account_id,
           any_value(leaker_account_id) AS leaker_account_id,
           bool_or(cross_account) AS cross_account,
           max(CASE confidence WHEN 'confirmed' THEN 3 WHEN 'ledger' THEN 2 ELSE 1 END) AS rank,
           count(*) AS runs, min(first_read_at) AS first_read_at, max(last_read_at) AS last_read_at
    FROM runs GROUP BY r, w, node
)
SELECT p.r AS receiver_request_id, p.w AS leaker_request_id, p.node, p.receiver_account_id,
       p.leaker_account_id, p.cross_account, p.rank, t.tokens, p.runs, p.first_read_at,
       p.last_read_at
FROM pairs p JOIN pair_tokens t USING (r, w, node);
