-- The quarantine rows of the checked parts (_parts: rank, rel), in part and row order.
SELECT 'kv_events' AS table_name, p.rel AS file, c.src_row AS "row", c.q."column" AS "column",
       c.q."value" AS "value", c.q.reason AS reason
FROM checked c JOIN _parts p ON p.rank = c.part_rank
WHERE c.q IS NOT NULL
ORDER BY c.part_rank, c.src_row;
