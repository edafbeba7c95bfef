-- How many (second reader, leaker) pairs listing every second read one by one would make
-- (queries/analysis/possible_cache_hits.sql): for each second reader, the pairs of its stub on
-- the node it read, counted per stub and node without pairing them.
WITH per_node AS (
    SELECT receiver_request_id AS stub_id, node, count(*) AS pairs
    FROM possible_exposures
    WHERE receiver_request_id IN (SELECT stub_id FROM _cache_hitters)
    GROUP BY ALL
)
SELECT coalesce(sum(c.pairs), 0)
FROM _cache_hitters h
JOIN per_node c ON c.stub_id = h.stub_id AND kvf_second_read_on(h.node, h.hit_node, c.node);
