-- bench_independent: the reconstruction's cross-account pairs as it found them.
SELECT receiver_request_id, receiver_account_id, leaker_request_id, leaker_account_id
FROM reconstructed_exposures
WHERE cross_account;
