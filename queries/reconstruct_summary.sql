-- The figures reconstruct prints: events written, (receiver, leaker, node) pairs, cross-account.
SELECT (SELECT count(*) FROM reconstructed_events) AS events,
       (SELECT count(*) FROM reconstructed_exposures) AS pairs,
       (SELECT count(*) FROM reconstructed_exposures WHERE cross_account) AS cross_account_pairs;
