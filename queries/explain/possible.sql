-- Possible (screened) pairs of each request explained, on either side: the other request, its
-- account, the node, the basis; at most $limit per request and side (the counts are in
-- possible_counts), nearest basis first.
SELECT request_id, side, other_request_id, other_account_id, node, cross_account, basis
FROM (
    SELECT receiver_request_id AS request_id, 'receiving' AS side,
           leaker_request_id AS other_request_id, leaker_account_id AS other_account_id, node,
           cross_account, basis
    FROM possible_exposures WHERE receiver_request_id IN (SELECT request_id FROM explain_ids)
    UNION ALL
    SELECT leaker_request_id, 'leaking', receiver_request_id, receiver_account_id, node,
           cross_account, basis
    FROM possible_exposures WHERE leaker_request_id IN (SELECT request_id FROM explain_ids)
)
QUALIFY row_number() OVER (
    PARTITION BY request_id, side
    ORDER BY CASE basis WHEN 'concurrent' THEN 0 WHEN 'window' THEN 1 WHEN 'earlier' THEN 2
                        ELSE 3 END, other_request_id, node) <= $limit
ORDER BY request_id, side, CASE basis WHEN 'concurrent' THEN 0 WHEN 'window' THEN 1
                                      WHEN 'earlier' THEN 2 ELSE 3 END, other_request_id, node;
