-- Time to first token against prompt length for every request with both times; `suspect` when
-- screening flagged it or it received another request's data in the ledger.
WITH receivers AS (SELECT DISTINCT receiver_request_id AS request_id FROM exposures),
flagged AS (SELECT request_id FROM screening WHERE len(reasons) > 0)
SELECT r.request_id, r.prompt_tokens,
       epoch_ms(r.first_token_at) - epoch_ms(r.received_at) AS ttft_ms,
       (r.request_id IN (SELECT request_id FROM receivers)
        OR r.request_id IN (SELECT request_id FROM flagged)) AS suspect
FROM requests r
WHERE r.first_token_at IS NOT NULL AND r.first_token_at >= r.received_at
ORDER BY r.request_id;
