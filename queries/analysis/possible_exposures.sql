-- possible_exposures: for every screened suspect receiver that no complete ledger covers
-- (screening.ledger_covered false: no ledger, a ledger with a hole over it, or a ledger that
-- does not reach it), every other request on the same decode node that could have written the
-- pages it read (docs/DESIGN.md §4, "Evidence only adds"). Freed pages are not zeroed, so the
-- data of any earlier request on the node may still sit in the pages a suspect is handed, how
-- long ago it ran does not bound that. What bounds it is the pool: a request of an earlier
-- start of the node (node_starts, or the nodes table's started_at) wrote into a pool that no
-- longer exists. basis ranks the pairs, it never drops one:
--   concurrent  received while the suspect was in flight (it may write into the suspect's
--               pages: double allocation, a late transfer);
--   window      received before it and still active within window_s seconds before it
--               arrived (its pages were freed most recently);
--   earlier     received earlier since the node's pool was made (its data may persist in
--               pages not handed out since).
-- A receiver the ledger found, on a node whose ledger has a hole before it ended, is a suspect
-- too: the ledger may name an earlier writer of the pages it read where the true one's write
-- was lost. Suspect reasons: $suspect_reasons (forensics.analysis.screening.SUSPECT_REASONS;
-- deferred-release-timeout alone does not make a receiver). Reconstruction adds and ranks
-- (reconstructed_exposures) and never removes a pair here; only what positive evidence cleared
-- leaves (queries/analysis/cleared_findings.sql, made first).
DELETE FROM possible_exposures;

INSERT INTO possible_exposures BY NAME
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
    WHERE NOT s.ledger_covered AND s.decode_node IS NOT NULL
      AND (len(list_intersect(s.reasons, $suspect_reasons)) > 0
           OR s.coverage = 'ledger-hole' AND EXISTS (
                  SELECT 1 FROM exposure_tokens e WHERE e.receiver_request_id = s.request_id))
), pairs AS (
    SELECT s.request_id AS receiver_request_id, s.account_id AS receiver_account_id,
           l.request_id AS leaker_request_id, l.account_id AS leaker_account_id,
           s.decode_node AS node, s.account_id <> l.account_id AS cross_account,
           CASE WHEN l.received_at > s.received_at THEN 'concurrent'
                WHEN coalesce(l.completed_at, l.first_token_at, l.received_at)
                     >= s.received_at - to_microseconds(CAST($window_s * 1000000 AS BIGINT))
                THEN 'window'
                ELSE 'earlier' END AS basis
    FROM suspect s
    JOIN work.analysis_requests l
      ON l.serving_decode_node = s.decode_node AND l.request_id <> s.request_id
     AND l.received_at <= s.ended_at
     AND (s.pool_since IS NULL OR l.received_at >= s.pool_since)
)
SELECT * FROM pairs p
WHERE NOT EXISTS (
    SELECT 1 FROM cleared_findings c
    WHERE c.receiver_request_id = p.receiver_request_id AND c.node = p.node
      AND (c.leaker_request_id IS NULL OR c.leaker_request_id = p.leaker_request_id))
ORDER BY node, receiver_request_id, leaker_request_id;
