-- affected_requests: one row per (side, request), cross-account exposures only.
-- ledger: from exposure_tokens (tokens = docs/DESIGN.md §6 token exposures of the request on that side,
-- times = first and last read of its exposures). possible: screening pairs for requests that the
-- ledger does not already put on that side (tokens NULL, times = the receivers' arrival).
DELETE FROM affected_requests;

INSERT INTO affected_requests BY NAME
WITH ledger AS (
    SELECT 'receiving' AS side, receiver_request_id AS request_id,
           receiver_account_id AS account_id, 'ledger' AS confidence, sum(tokens) AS tokens,
           count(DISTINCT leaker_request_id) AS counterpart_requests,
           min(first_read_at) AS first_affected_at, max(last_read_at) AS last_affected_at
    FROM exposure_tokens WHERE cross_account GROUP BY ALL
    UNION ALL
    SELECT 'leaking', leaker_request_id, leaker_account_id, 'ledger', sum(tokens),
           count(DISTINCT receiver_request_id), min(first_read_at), max(last_read_at)
    FROM exposure_tokens WHERE cross_account GROUP BY ALL
), pairs AS (
    SELECT p.*, q.received_at FROM possible_exposures p
    JOIN work.analysis_requests q ON q.request_id = p.receiver_request_id
    WHERE p.cross_account
), possible AS (
    SELECT 'receiving' AS side, receiver_request_id AS request_id,
           receiver_account_id AS account_id, 'possible' AS confidence,
           CAST(NULL AS BIGINT) AS tokens,
           count(DISTINCT leaker_request_id) AS counterpart_requests,
           min(received_at) AS first_affected_at, max(received_at) AS last_affected_at
    FROM pairs GROUP BY ALL
    UNION ALL
    SELECT 'leaking', leaker_request_id, leaker_account_id, 'possible', CAST(NULL AS BIGINT),
           count(DISTINCT receiver_request_id), min(received_at), max(received_at)
    FROM pairs GROUP BY ALL
)
SELECT * FROM ledger
UNION ALL
SELECT * FROM possible p
WHERE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.side = p.side AND l.request_id = p.request_id)
ORDER BY side, request_id;
