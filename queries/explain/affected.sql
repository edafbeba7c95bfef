-- The notification-list rows (affected_requests) of each request explained, both sides.
SELECT request_id, side, account_id, confidence, tokens, counterpart_requests,
       first_affected_at, last_affected_at, support
FROM affected_requests
WHERE request_id IN (SELECT request_id FROM explain_ids)
ORDER BY request_id, side;
