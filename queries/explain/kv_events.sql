-- The KV ledger events of each request explained, summarised per node and operation: events,
-- distinct slots, first and last time, and the slot ranges with overlapping or adjacent ranges merged
-- (first and last slot of each merged range, in slot order).
WITH ev AS (
    SELECT request_id, node, op, slot_start, slot_start + slot_count AS slot_end, slot_count, ts
    FROM kv_events
    WHERE request_id IN (SELECT request_id FROM explain_ids)
),
ordered AS (
    SELECT *, max(slot_end) OVER (
        PARTITION BY request_id, node, op ORDER BY slot_start, slot_end
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reached
    FROM ev
),
grouped AS (
    SELECT *, sum(CASE WHEN reached IS NULL OR slot_start > reached THEN 1 ELSE 0 END) OVER (
        PARTITION BY request_id, node, op ORDER BY slot_start, slot_end
        ROWS UNBOUNDED PRECEDING) AS island
    FROM ordered
),
ranges AS (
    SELECT request_id, node, op, island, min(slot_start) AS first_slot,
           max(slot_end) - 1 AS last_slot, count(*) AS events,
           max(slot_end) - min(slot_start) AS slots,
           min(ts) AS first_at, max(ts) AS last_at
    FROM grouped
    GROUP BY request_id, node, op, island
)
SELECT request_id, node, op, sum(events) AS events, sum(slots) AS slots,
       min(first_at) AS first_at, max(last_at) AS last_at,
       list({'first': first_slot, 'last': last_slot} ORDER BY first_slot) AS ranges
FROM ranges
GROUP BY request_id, node, op
ORDER BY request_id, min(first_at), node,
         CASE op WHEN 'alloc' THEN 0 WHEN 'share' THEN 1 WHEN 'write' THEN 2 WHEN 'read' THEN 3
                 WHEN 'free' THEN 4 ELSE 5 END, op;
