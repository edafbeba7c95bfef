-- Possible (screened) pairs of each request explained, counted per side and basis.
SELECT request_id, side, coalesce(basis, 'unknown') AS basis, count(*) AS pairs,
       count(*) FILTER (WHERE cross_account) AS cross_account_pairs
FROM (
    SELECT receiver_request_id AS request_id, 'receiving' AS side, basis, cross_account
    FROM possible_exposures WHERE receiver_request_id IN (SELECT request_id FROM explain_ids)
    UNION ALL
    SELECT leaker_request_id, 'leaking', basis, cross_account
    FROM possible_exposures WHERE leaker_request_id IN (SELECT request_id FROM explain_ids)
)
GROUP BY ALL
ORDER BY request_id, side, basis;
