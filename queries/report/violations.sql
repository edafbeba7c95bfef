-- Ownership violations per kind and node.
SELECT violation, node, count(*) AS runs, sum(slot_count) AS slots,
       count(DISTINCT request_id) AS requests, min(first_at) AS first_at, max(last_at) AS last_at
FROM violations GROUP BY ALL ORDER BY violation, node;
