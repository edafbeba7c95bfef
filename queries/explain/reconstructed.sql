-- Reconstructed pairs of each request explained, on either side (reconstructed_exposures):
-- the other request, its account, the node, slots read, support and replay's verdict.
SELECT receiver_request_id AS request_id, 'receiving' AS side,
       leaker_request_id AS other_request_id, leaker_account_id AS other_account_id, node,
       tokens, support, read_at, cross_account, verdict
FROM reconstructed_exposures WHERE receiver_request_id IN (SELECT request_id FROM explain_ids)
UNION ALL
SELECT leaker_request_id, 'leaking', receiver_request_id, receiver_account_id, node, tokens,
       support, read_at, cross_account, verdict
FROM reconstructed_exposures WHERE leaker_request_id IN (SELECT request_id FROM explain_ids)
ORDER BY request_id, side, read_at, other_request_id, node;
