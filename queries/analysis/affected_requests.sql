-- affected_requests: one row per (side, request), cross-account exposures only.
-- ledger: from exposure_tokens (tokens = docs/DESIGN.md §6 token exposures of the request on
-- that side, times = first and last read of its exposures). reconstructed: pairs that
-- kvforensics reconstruct found on ledger-less nodes (tokens = slots read, times = the
-- receivers' first token, support = the best share of explored orders among the request's pairs;
-- `confirmed` when replay reproduced the delivered output from a layout holding the pair, pairs
-- replay cleared left out; a pair's tokens never exceed the receiver's billed prompt, nor a
-- receiver's sum: a count is the most over the orders, and the orders differ), for requests
-- the ledger does not put on that side. possible: screening pairs for requests that neither
-- puts on that side (tokens NULL, times = the receivers' arrival), and every screened suspect
-- that no complete ledger covers, also one with no cross-account pair (counterpart_requests
-- 0), unless replay cleared it as a whole (cleared_findings): evidence only adds
-- (docs/DESIGN.md §4).
DELETE FROM affected_requests;

INSERT INTO affected_requests BY NAME
WITH ledger AS (
    SELECT 'receiving' AS side, receiver_request_id AS request_id,
           receiver_account_id AS account_id, 'ledger' AS confidence, sum(tokens) AS tokens,
           count(DISTINCT leaker_request_id) AS counterpart_requests,
           min(first_read_at) AS first_affected_at, max(last_read_at) AS last_affected_at,
           CAST(NULL AS DOUBLE) AS support
    FROM exposure_tokens WHERE cross_account GROUP BY ALL
    UNION ALL
    SELECT 'leaking', leaker_request_id, leaker_account_id, 'ledger', sum(tokens),
           count(DISTINCT receiver_request_id), min(first_read_at), max(last_read_at),
           CAST(NULL AS DOUBLE)
    FROM exposure_tokens WHERE cross_account GROUP BY ALL
), kept AS (
    SELECT e.* REPLACE (least(e.tokens, coalesce(q.prompt_tokens, e.tokens)) AS tokens),
           q.prompt_tokens AS receiver_prompt_tokens
    FROM reconstructed_exposures e
    LEFT JOIN work.analysis_requests q ON q.request_id = e.receiver_request_id
    WHERE e.cross_account AND e.verdict IS DISTINCT FROM 'cleared'
), rebuilt AS (
    SELECT 'receiving' AS side, receiver_request_id AS request_id,
           receiver_account_id AS account_id,
           CASE WHEN bool_or(verdict = 'confirmed') THEN 'confirmed' ELSE 'reconstructed' END
               AS confidence,
           least(sum(tokens), coalesce(any_value(receiver_prompt_tokens), sum(tokens)))
               AS tokens,
           count(DISTINCT leaker_request_id) AS counterpart_requests,
           min(read_at) AS first_affected_at, max(read_at) AS last_affected_at,
           max(support) AS support
    FROM kept GROUP BY receiver_request_id, receiver_account_id
    UNION ALL
    SELECT 'leaking', leaker_request_id, leaker_account_id,
           CASE WHEN bool_or(verdict = 'confirmed') THEN 'confirmed' ELSE 'reconstructed' END,
           sum(tokens), count(DISTINCT receiver_request_id), min(read_at), max(read_at),
           max(support)
    FROM kept GROUP BY leaker_request_id, leaker_account_id
), known AS (
    SELECT * FROM ledger
    UNION ALL
    SELECT * FROM rebuilt r
    WHERE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.side = r.side AND l.request_id = r.request_id)
), pairs AS (
    SELECT p.*, q.received_at FROM possible_exposures p
    JOIN work.analysis_requests q ON q.request_id = p.receiver_request_id
    WHERE p.cross_account
), possible AS (
    SELECT 'receiving' AS side, receiver_request_id AS request_id,
           receiver_account_id AS account_id, 'possible' AS confidence,
           CAST(NULL AS BIGINT) AS tokens,
           count(DISTINCT leaker_request_id) AS counterpart_requests,
           min(received_at) AS first_affected_at, max(received_at) AS last_affected_at,
           CAST(NULL AS DOUBLE) AS support
    FROM pairs GROUP BY ALL
    UNION ALL
    SELECT 'leaking', leaker_request_id, leaker_account_id, 'possible', CAST(NULL AS BIGINT),
           count(DISTINCT receiver_request_id), min(received_at), max(received_at),
           CAST(NULL AS DOUBLE)
    FROM pairs GROUP BY ALL
    UNION ALL
    SELECT 'receiving', s.request_id, s.account_id, 'possible', CAST(NULL AS BIGINT), 0,
           q.received_at, q.received_at, CAST(NULL AS DOUBLE)
    FROM screening s JOIN work.analysis_requests q USING (request_id)
    WHERE NOT s.ledger_covered AND len(list_intersect(s.reasons, $suspect_reasons)) > 0
      AND NOT EXISTS (SELECT 1 FROM pairs p WHERE p.receiver_request_id = s.request_id)
      AND NOT EXISTS (SELECT 1 FROM cleared_findings c
                      WHERE c.receiver_request_id = s.request_id AND c.leaker_request_id IS NULL)
)
SELECT * FROM known
UNION ALL
SELECT * FROM possible p
WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.side = p.side AND k.request_id = p.request_id)
ORDER BY side, request_id;
