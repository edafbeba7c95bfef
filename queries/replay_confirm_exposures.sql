-- Exposure rows of a confirmed receiver become `confirmed`; earlier confirmations that a new
-- replay no longer supports fall back to `ledger`.
UPDATE exposures
SET confidence = CASE
    WHEN receiver_request_id IN (SELECT request_id FROM replay_results WHERE verdict = 'confirmed')
        THEN 'confirmed'
    ELSE 'ledger' END
WHERE confidence IN ('ledger', 'confirmed');
