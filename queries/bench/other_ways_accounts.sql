-- The leaking accounts the pairs kept apart name (cross-account), for the benchmark to score.
SELECT DISTINCT leaker_account_id FROM reconstructed_other_ways WHERE cross_account ORDER BY 1;
