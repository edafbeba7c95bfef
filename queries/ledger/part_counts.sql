-- The rows each checked part (of _parts: rank, rel) holds and those quarantined, in rank order.
-- Every row of a part is in one group of queries/ledger/check_part.sql.
SELECT p.rel, CAST(coalesce(sum(c.events), 0) AS BIGINT) AS rows_read,
       CAST(coalesce(sum(c.events) FILTER (WHERE c.q IS NOT NULL), 0) AS BIGINT) AS quarantined
FROM _parts p LEFT JOIN checked c ON c.part_rank = p.rank
GROUP BY p.rank, p.rel
ORDER BY p.rank;
