-- read_stats: per reading request and node, the read count and the distinct slots its reads
-- saw in each category (the union of the sweep's category pieces).
DELETE FROM read_stats;

INSERT INTO read_stats BY NAME
WITH piece AS (
    SELECT e.request_id, p.node, p.category_code, p.slot_start, p.slot_end
    FROM analysis_read_pieces p
    JOIN analysis_events e ON e.node = p.node AND e.ord = p.read_ord
), reach AS (
    SELECT *, max(slot_end) OVER (
        PARTITION BY request_id, node, category_code
        ORDER BY slot_start, slot_end ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS reach_before
    FROM piece
), island AS (
    SELECT *, sum(CASE WHEN reach_before IS NULL OR slot_start > reach_before THEN 1 ELSE 0 END)
        OVER (PARTITION BY request_id, node, category_code
              ORDER BY slot_start, slot_end ROWS UNBOUNDED PRECEDING) AS run_no
    FROM reach
), runs AS (
    SELECT request_id, node, category_code, max(slot_end) - min(slot_start) AS slots
    FROM island GROUP BY request_id, node, category_code, run_no
), per_cat AS (
    SELECT request_id, node,
           sum(slots) FILTER (WHERE category_code = 0) AS own_slots,
           sum(slots) FILTER (WHERE category_code = 1) AS shared_verified,
           sum(slots) FILTER (WHERE category_code = 2) AS shared_unverified,
           sum(slots) FILTER (WHERE category_code = 3) AS foreign_slots,
           sum(slots) FILTER (WHERE category_code = 4) AS uninitialised_slots
    FROM runs GROUP BY request_id, node
), reads AS (
    SELECT request_id, node, count(*) AS reads
    FROM analysis_events WHERE op = 'read' GROUP BY request_id, node
)
SELECT reads.request_id, reads.node, reads.reads,
       coalesce(own_slots, 0) AS own_slots, coalesce(shared_verified, 0) AS shared_verified,
       coalesce(shared_unverified, 0) AS shared_unverified,
       coalesce(foreign_slots, 0) AS foreign_slots,
       coalesce(uninitialised_slots, 0) AS uninitialised_slots
FROM reads LEFT JOIN per_cat USING (request_id, node)
ORDER BY node, request_id;
