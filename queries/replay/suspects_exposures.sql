-- Suspect receivers found in the ledger (any exposure).
SELECT DISTINCT receiver_request_id AS request_id
FROM exposures
ORDER BY request_id;
