-- The figures reconstruct prints: events written, (receiver, leaker, node) pairs, cross-account
-- pairs not cleared by replay, pairs replay confirmed and cleared.
SELECT (SELECT count(*) FROM reconstructed_events) AS events,
       (SELECT count(*) FROM reconstructed_exposures) AS pairs,
       (SELECT count(*) FROM reconstructed_exposures
        WHERE cross_account AND verdict IS DISTINCT FROM 'cleared') AS cross_account_pairs,
       (SELECT count(*) FROM reconstructed_exposures WHERE verdict = 'confirmed') AS confirmed,
       (SELECT count(*) FROM reconstructed_exposures WHERE verdict = 'cleared') AS cleared;
