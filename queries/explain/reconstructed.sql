-- Reconstructed pairs of each request explained, on either side: the other request, its
-- account, the node, slots read, support and replay's verdict; kept_apart: a pair only the
-- free lists the node's SGLang release does not build read (reconstructed_other_ways), not
-- listed.
WITH pairs AS (
    SELECT receiver_request_id, receiver_account_id, leaker_request_id, leaker_account_id, node,
           tokens, support, read_at, cross_account, verdict, false AS kept_apart
    FROM reconstructed_exposures
    UNION ALL
    SELECT receiver_request_id, receiver_account_id, leaker_request_id, leaker_account_id, node,
           tokens, support, read_at, cross_account, NULL, true
    FROM reconstructed_other_ways
)
SELECT receiver_request_id AS request_id, 'receiving' AS side,
       leaker_request_id AS other_request_id, leaker_account_id AS other_account_id, node,
       tokens, support, read_at, cross_account, verdict, kept_apart
FROM pairs WHERE receiver_request_id IN (SELECT request_id FROM explain_ids)
UNION ALL
SELECT leaker_request_id, 'leaking', receiver_request_id, receiver_account_id, node, tokens,
       support, read_at, cross_account, verdict, kept_apart
FROM pairs WHERE leaker_request_id IN (SELECT request_id FROM explain_ids)
ORDER BY request_id, side, kept_apart, read_at, other_request_id, node;
