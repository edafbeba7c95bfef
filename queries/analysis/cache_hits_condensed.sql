-- The second reads (queries/analysis/possible_cache_hits.sql) where pairing each with every
-- possible leaker of its stub would make more than $second_read_pairs pairs (a node where
-- prompts are shared across accounts: thousands of later hits times thousands of the stub's
-- leakers). They are condensed to what the lists need, in time linear in hits and leakers:
--   each second reader with the latest of its stub's leakers (on the node it read) whose
--   account is not its own, so that it is listed as receiving;
--   each leaker of the stub's own account with the first second reader of another account
--   (on a node where the pair is possible), so that it is listed as leaking.
-- Basis 'stub-cache-hit-condensed'. Who is listed is the same as pair by pair; how many
-- counterparts each has is not counted in full, and the analyze line, the report and explain
-- say so.
CREATE OR REPLACE TEMP TABLE _cache_leakers AS
SELECT p.receiver_request_id AS stub_id, p.node, p.leaker_request_id, p.leaker_account_id,
       q.received_at
FROM possible_exposures p
JOIN work.analysis_requests q ON q.request_id = p.leaker_request_id
WHERE p.receiver_request_id IN (SELECT stub_id FROM _cache_hitters);

CREATE OR REPLACE TEMP TABLE _cache_candidates AS
WITH latest AS (  -- per stub and node: its latest leaker, and the latest of another account
    SELECT stub_id, node,
           arg_max(leaker_request_id, (received_at, leaker_request_id)) AS first_id,
           arg_max(leaker_account_id, (received_at, leaker_request_id)) AS first_account
    FROM _cache_leakers GROUP BY stub_id, node
), latest2 AS (
    SELECT l.*, (SELECT arg_max(c.leaker_request_id, (c.received_at, c.leaker_request_id))
                 FROM _cache_leakers c
                 WHERE c.stub_id = l.stub_id AND c.node = l.node
                   AND c.leaker_account_id <> l.first_account) AS second_id
    FROM latest l
), readers AS (  -- each second reader with one leaker foreign to it
    SELECT DISTINCT h.request_id AS receiver_request_id, h.account_id AS receiver_account_id,
           CASE WHEN l.first_account <> h.account_id THEN l.first_id ELSE l.second_id END
               AS leaker_request_id,
           CASE WHEN l.node = '' THEN coalesce(h.hit_node, '') ELSE l.node END AS node
    FROM _cache_hitters h
    JOIN latest2 l ON l.stub_id = h.stub_id AND kvf_second_read_on(h.node, h.hit_node, l.node)
), first_foreign AS (  -- per stub and hit node: its first second reader of another account
    SELECT stub_id, hit_node, min(request_id) AS request_id
    FROM _cache_hitters WHERE account_id <> stub_account_id
    GROUP BY stub_id, hit_node
), own AS (  -- each leaker of the stub's own account with one second reader foreign to it
    SELECT DISTINCT f.request_id AS receiver_request_id, c.leaker_request_id,
           CASE WHEN c.node = '' THEN coalesce(f.hit_node, '') ELSE c.node END AS node
    FROM _cache_leakers c
    JOIN (SELECT DISTINCT stub_id, stub_account_id, node FROM _cache_hitters) s
      ON s.stub_id = c.stub_id AND c.leaker_account_id = s.stub_account_id
    JOIN first_foreign f
      ON f.stub_id = c.stub_id AND kvf_second_read_on(s.node, f.hit_node, c.node)
    WHERE f.request_id <> c.leaker_request_id
), kept AS (
    SELECT receiver_request_id, leaker_request_id, node FROM readers
    WHERE leaker_request_id IS NOT NULL AND leaker_request_id <> receiver_request_id
    UNION
    SELECT receiver_request_id, leaker_request_id, node FROM own
)
SELECT DISTINCT k.receiver_request_id, r.account_id AS receiver_account_id,
       k.leaker_request_id, l.account_id AS leaker_account_id, k.node,
       r.account_id <> l.account_id AS cross_account, 'stub-cache-hit-condensed' AS basis
FROM kept k
JOIN work.analysis_requests r ON r.request_id = k.receiver_request_id
JOIN work.analysis_requests l ON l.request_id = k.leaker_request_id;

DROP TABLE _cache_leakers;
