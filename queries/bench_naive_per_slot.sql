-- The naive per-slot approach DESIGN §7 warns about, for comparison only: one row per slot of
-- every write and read, then each read slot joined to the last write of that slot before it.
-- (It ignores shares and seq; it exists to show the cost of exploding ranges.)
WITH ordered AS (
    SELECT node, request_id, op, slot_start, slot_count,
           row_number() OVER (PARTITION BY node ORDER BY ts,
               CASE op WHEN 'free' THEN 0 WHEN 'alloc' THEN 1 WHEN 'share' THEN 2
                       WHEN 'write' THEN 3 ELSE 4 END, input_order) AS k
    FROM kv_events WHERE op IN ('write', 'read')
), slots AS (
    SELECT node, request_id, op, k, unnest(range(slot_start, slot_start + slot_count)) AS slot
    FROM ordered
), writes AS (
    SELECT node, slot, k, request_id AS writer FROM slots WHERE op = 'write'
), reads AS (
    SELECT node, slot, k, request_id AS reader FROM slots WHERE op = 'read'
)
SELECT count(*) FILTER (WHERE w.writer <> r.reader),
       (SELECT count(*) FROM slots)
FROM reads r ASOF JOIN writes w ON r.node = w.node AND r.slot = w.slot AND r.k > w.k;
