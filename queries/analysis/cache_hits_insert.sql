-- The second reads (queries/analysis/cache_hits_full.sql or cache_hits_condensed.sql) into
-- possible_exposures, but those evidence cleared and those the stubs' own pairs already hold.
INSERT INTO possible_exposures BY NAME
SELECT DISTINCT * FROM _cache_candidates c
WHERE NOT EXISTS (
    SELECT 1 FROM cleared_findings f
    WHERE f.receiver_request_id = c.receiver_request_id AND f.node = c.node
      AND (f.leaker_request_id IS NULL OR f.leaker_request_id = c.leaker_request_id))
  AND NOT EXISTS (
    SELECT 1 FROM possible_exposures p
    WHERE p.receiver_request_id = c.receiver_request_id AND p.node = c.node
      AND p.leaker_request_id = c.leaker_request_id)
ORDER BY node, receiver_request_id, leaker_request_id;

DROP TABLE _cache_candidates;
DROP TABLE _cache_hitters;
