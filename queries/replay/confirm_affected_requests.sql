-- affected_requests: a receiver confirmed by a run with the request log's model, and each
-- request of another account whose KV it read in that run, become `confirmed`; confirmations
-- without such a run fall back (`possible` when no tokens were counted), except those that
-- replay confirmed on a reconstructed layout (reconstructed_exposures).
WITH pairs AS (
    SELECT a.request_id AS receiver, a.leaker_request_id AS leaker
    FROM replay_attention a
    JOIN replay_results r ON r.request_id = a.request_id AND r.verdict = 'confirmed'
                         AND r.run_id IS NOT DISTINCT FROM a.run_id
                         AND COALESCE(r.model_matches, true)
    JOIN requests rr ON rr.request_id = a.request_id
    JOIN requests lr ON lr.request_id = a.leaker_request_id
    WHERE rr.account_id <> lr.account_id
)
UPDATE affected_requests
SET confidence = CASE
    WHEN (side = 'receiving' AND request_id IN (SELECT receiver FROM pairs))
      OR (side = 'leaking' AND request_id IN (SELECT leaker FROM pairs)) THEN 'confirmed'
    WHEN confidence = 'confirmed' AND EXISTS (
        SELECT 1 FROM reconstructed_exposures x
        WHERE x.verdict = 'confirmed' AND x.cross_account
          AND ((side = 'receiving' AND x.receiver_request_id = request_id)
            OR (side = 'leaking' AND x.leaker_request_id = request_id))) THEN 'confirmed'
    WHEN confidence = 'confirmed' THEN CASE WHEN tokens IS NULL THEN 'possible' ELSE 'ledger' END
    ELSE confidence END;
