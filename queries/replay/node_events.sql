-- On one node, in the ledger order (docs/DESIGN.md §3): the request's reads and shares, and every write
-- that overlaps the span of slots the request read. ord ranks the returned events in that order:
-- (seq, input_order) when every event of the node has seq, else (ts, op rank, input_order).
WITH node_flags AS (
    SELECT bool_and(seq IS NOT NULL) AS all_seq
    FROM kv_events
    WHERE node = $node
),
span AS (
    SELECT min(slot_start) AS lo, max(slot_start + slot_count) AS hi
    FROM kv_events
    WHERE node = $node AND op = 'read' AND request_id = $request_id
),
picked AS (
    SELECT e.*
    FROM kv_events e, span
    WHERE e.node = $node
      AND ((e.op IN ('read', 'share') AND e.request_id = $request_id)
        OR (e.op = 'write' AND e.slot_start < span.hi AND e.slot_start + e.slot_count > span.lo))
)
SELECT row_number() OVER (ORDER BY
           CASE WHEN f.all_seq THEN p.seq END,
           CASE WHEN f.all_seq THEN NULL ELSE p.ts END,
           CASE WHEN f.all_seq THEN 0 WHEN p.op = 'share' THEN 2 WHEN p.op = 'write' THEN 3
                ELSE 4 END,
           p.input_order) AS ord,
       p.op, p.request_id, p.slot_start, p.slot_count, p.pos_start, p.ts, p.source
FROM picked p, node_flags f
ORDER BY ord;
