-- Exposure rows of a receiver that a run with the request log's model confirmed become
-- `confirmed` (every run's verdicts are kept, so a later run never lowers it); others keep or
-- fall back to `ledger`.
UPDATE exposures
SET confidence = CASE
    WHEN receiver_request_id IN (SELECT request_id FROM replay_results
                                 WHERE verdict = 'confirmed' AND COALESCE(model_matches, true))
        THEN 'confirmed'
    ELSE 'ledger' END
WHERE confidence IN ('ledger', 'confirmed');
