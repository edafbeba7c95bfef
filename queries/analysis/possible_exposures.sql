-- possible_exposures: for every screened suspect receiver that no complete ledger covers
-- (screening.ledger_covered false: no ledger, a ledger with a hole over it, or a ledger that
-- does not reach it), every other request on the same decode node that could have written the
-- pages it read (docs/DESIGN.md §4, "Evidence only adds"). Freed pages are not zeroed, so the
-- data of any earlier request on the node may still sit in the pages a suspect is handed, how
-- long ago it ran does not bound that. Where the log names no serving node for the suspect,
-- every request is a candidate (node: the candidate's, '' where neither names one), and a
-- candidate that names none may have run on the suspect's node, unless the gateway refused
-- it (a 4xx with no output: it reached no engine). What bounds it is the pool:
-- a request of an earlier start of the node (node_starts, or the nodes table's started_at)
-- wrote into a pool that no longer exists. basis ranks the pairs, it never drops one:
--   concurrent  received while the suspect was in flight (it may write into the suspect's
--               pages: double allocation, a late transfer);
--   window      received before it and still active within window_s seconds before it
--               arrived (its pages were freed most recently);
--   earlier     received earlier since the node's pool was made (its data may persist in
--               pages not handed out since).
-- A receiver the ledger found, on a node whose ledger has a hole before it ended, is a suspect
-- too: the ledger may name an earlier writer of the pages it read where the true one's write
-- was lost. Suspect reasons: $suspect_reasons (forensics.analysis.screening.SUSPECT_REASONS;
-- deferred-release-timeout alone does not make a receiver). Only what positive evidence cleared
-- leaves (queries/analysis/cleared_findings.sql, made first, and the reconstruction rule below).
--
-- Reconstruction: a suspect flagged only as a stub ($stub_reasons), whose first decode read
-- reconstruction modelled on its node's real allocator (SGLang's or vLLM's, not the fallback
-- pool), read the pages of the requests reconstructed_exposures names over the explored runs
-- (scheduler variants x orders). That holds on a disaggregated decode node (no prefix cache),
-- and on a vLLM unified node only where the runs were made on vLLM's KV cache manager with
-- prefix caching and reproduced every request's logged cached_tokens
-- (reconstructed_nodes.consistent; the stub's read of fresh blocks modelled as the engine
-- does it): an inconsistent or unchecked unified node clears nothing. A candidate found in none of them did not write those pages
-- under any explored run: the pair goes to cleared_findings (evidence 'reconstruction')
-- instead of this table. A run that left the stub waiting for pages at its first token
-- contradicts the log (the engine had given it pages) and made no read: the pairs are those
-- of the runs that read it. Where no run read it (reconstructed_requests.unread: every run lost
-- the engine's state in a burst), only candidates from before the window (basis 'earlier',
-- whose pages every run reused or kept alike) are cleared; the window's and the concurrent ones
-- stay possible. Where replay ran
-- and no explored layout explained the delivered output (reconstructed_requests.contradicted)
-- the rebuilt trace is not the engine's for that read and nothing is cleared. A read after the
-- point where not every order of events could be followed (reconstructed_requests.sampled)
-- clears over a sample of orders, as the node's variants say. A suspect with
-- another reason (a checksum or canary fault reconstruction does not model) keeps every pair.
DELETE FROM possible_exposures;

CREATE OR REPLACE TEMP TABLE _possible_candidates AS
WITH starts AS (
    SELECT node, started_at FROM nodes WHERE started_at IS NOT NULL
    UNION
    SELECT node, started_at FROM node_starts WHERE started_at IS NOT NULL
), suspect AS (
    SELECT s.request_id, s.account_id, s.decode_node, q.received_at,
           coalesce(q.completed_at, q.first_token_at, q.received_at) AS ended_at,
           (SELECT max(st.started_at) FROM starts st
            WHERE st.node = s.decode_node AND st.started_at <= q.received_at) AS pool_since
    FROM screening s JOIN work.analysis_requests q USING (request_id)
    WHERE NOT s.ledger_covered
      AND (len(list_intersect(s.reasons, $suspect_reasons)) > 0
           OR s.coverage = 'ledger-hole' AND EXISTS (
                  SELECT 1 FROM exposure_tokens e WHERE e.receiver_request_id = s.request_id))
), pairs AS (
    SELECT s.request_id AS receiver_request_id, s.account_id AS receiver_account_id,
           l.request_id AS leaker_request_id, l.account_id AS leaker_account_id,
           coalesce(s.decode_node, l.serving_decode_node, '') AS node,
           s.account_id <> l.account_id AS cross_account,
           CASE WHEN l.received_at > s.received_at THEN 'concurrent'
                WHEN coalesce(l.completed_at, l.first_token_at, l.received_at)
                     >= s.received_at - to_microseconds(CAST($window_s * 1000000 AS BIGINT))
                THEN 'window'
                ELSE 'earlier' END AS basis
    FROM suspect s
    JOIN work.analysis_requests l
      ON (l.serving_decode_node = s.decode_node OR s.decode_node IS NULL
          OR l.serving_decode_node IS NULL) AND l.request_id <> s.request_id
     AND NOT (l.serving_decode_node IS NULL AND l.http_status BETWEEN 400 AND 499
              AND l.first_token_at IS NULL AND coalesce(l.completion_tokens, 0) = 0)
     AND l.received_at <= s.ended_at
     AND (s.pool_since IS NULL OR l.received_at >= s.pool_since)
)
SELECT p.*, m.receiver_request_id IS NOT NULL AND (NOT m.unread OR p.basis = 'earlier')
           AS modelled, coalesce(m.sampled, false) AS sampled
FROM pairs p
LEFT JOIN (
    SELECT rr.request_id AS receiver_request_id, rr.node, coalesce(rr.unread, false) AS unread,
           rr.sampled
    FROM reconstructed_requests rr
    JOIN reconstructed_nodes rn ON rn.node = rr.node AND rn.allocator IN ('sglang', 'vllm')
                               AND (rn.role = 'decode'
                                    OR rn.role = 'unified' AND rn.allocator = 'vllm'
                                       AND coalesce(rn.consistent, false))
    JOIN screening s ON s.request_id = rr.request_id
    WHERE rr.stub AND NOT coalesce(rr.contradicted, false)
      AND len(list_intersect(s.reasons, $suspect_reasons)) > 0
      AND list_has_all($stub_reasons, list_intersect(s.reasons, $suspect_reasons))
) m USING (receiver_request_id, node);

INSERT INTO cleared_findings BY NAME
SELECT receiver_request_id, receiver_account_id, leaker_request_id, leaker_account_id, node,
       'reconstruction' AS evidence,
       'reconstruction on the node''s real allocator put no data of this request in the pages '
       || 'the stub read, in any explored run'
       || CASE WHEN p.sampled THEN ' (a sample of orders: the read came after the point where '
                                   || 'every order could be followed)'
               ELSE '' END AS reason
FROM _possible_candidates p
WHERE p.modelled AND NOT EXISTS (
    SELECT 1 FROM reconstructed_exposures e
    WHERE e.receiver_request_id = p.receiver_request_id AND e.node = p.node
      AND e.leaker_request_id = p.leaker_request_id)
ORDER BY 1, 3, 5;

INSERT INTO possible_exposures BY NAME
SELECT * EXCLUDE (modelled, sampled) FROM _possible_candidates p
WHERE NOT EXISTS (
    SELECT 1 FROM cleared_findings c
    WHERE c.receiver_request_id = p.receiver_request_id AND c.node = p.node
      AND (c.leaker_request_id IS NULL OR c.leaker_request_id = p.leaker_request_id))
ORDER BY node, receiver_request_id, leaker_request_id;

DROP TABLE _possible_candidates;
