-- Every second read (queries/analysis/possible_cache_hits.sql) paired with every possible
-- leaker of its stub on the node it read (a nodeless stub's: on the hit's node or on none the
-- log names), basis 'stub-cache-hit'. Run while these pairs number at most $second_read_pairs
-- (queries/analysis/cache_hit_pairs.sql counts them).
CREATE OR REPLACE TEMP TABLE _cache_candidates AS
SELECT DISTINCT h.request_id AS receiver_request_id, h.account_id AS receiver_account_id,
       p.leaker_request_id, p.leaker_account_id,
       CASE WHEN p.node = '' THEN coalesce(h.hit_node, '') ELSE p.node END AS node,
       h.account_id <> p.leaker_account_id AS cross_account, 'stub-cache-hit' AS basis
FROM _cache_hitters h
JOIN possible_exposures p
  ON p.receiver_request_id = h.stub_id AND kvf_second_read_on(h.node, h.hit_node, p.node)
WHERE p.leaker_request_id <> h.request_id;
