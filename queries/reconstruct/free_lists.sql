-- The leaking accounts the rebuilt SGLang reads name (cross-account pairs replay did not
-- clear, listed or kept apart) under each free list followed alone, and over every one
-- ('any'): how far stating the engine's way (--sglang-free-list) would narrow them.
WITH named AS (
    SELECT leaker_account_id, unnest(free_lists) AS way
    FROM reconstructed_exposures
    WHERE cross_account AND verdict IS DISTINCT FROM 'cleared' AND free_lists IS NOT NULL
    UNION ALL
    SELECT leaker_account_id, unnest(free_lists) AS way
    FROM reconstructed_other_ways
    WHERE cross_account
)
SELECT way, count(DISTINCT leaker_account_id) AS accounts FROM named GROUP BY way
UNION ALL
SELECT 'any', count(DISTINCT leaker_account_id) FROM named
ORDER BY way;
