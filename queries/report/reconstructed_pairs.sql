-- The largest reconstructed cross-account pairs ($1 rows), with their support share; total =
-- all cross-account pairs, receivers = their distinct receiving requests.
SELECT receiver_request_id, receiver_account_id, leaker_request_id, leaker_account_id, node,
       tokens, support, read_at, verdict,
       count(*) OVER () AS total,
       count(DISTINCT receiver_request_id) OVER () AS receivers
FROM reconstructed_exposures
WHERE cross_account AND verdict IS DISTINCT FROM 'cleared'
ORDER BY tokens DESC, support DESC, receiver_request_id, leaker_request_id, node
LIMIT $1;
