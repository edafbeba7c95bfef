-- The notifiable (cross-account) requests, one row per (side, request), as a TEMP view that
-- notify_requests and notify_accounts read. Base rows come from the analysis' affected_requests;
-- the confidence is raised to the best found in exposures (replay may mark them 'confirmed') or
-- in replay_results for the receiver (ranks: confirmed 4, ledger 3, reconstructed 2, possible 1;
-- support is the reconstructed share of explored orders); counterpart_accounts counts the distinct other accounts,
-- never naming them.
CREATE OR REPLACE TEMP VIEW notify_request_rows AS
WITH confirmed AS (
    SELECT DISTINCT request_id FROM replay_results
    WHERE verdict = 'confirmed' AND COALESCE(model_matches, true)  -- runs with the logged model
),
pairs AS (
    SELECT 'receiving' AS side, receiver_request_id AS request_id,
           leaker_account_id AS other_account,
           CASE WHEN receiver_request_id IN (SELECT request_id FROM confirmed)
                THEN 'confirmed' ELSE confidence END AS confidence
    FROM exposures WHERE cross_account
    UNION ALL
    SELECT 'leaking', leaker_request_id, receiver_account_id,
           CASE WHEN receiver_request_id IN (SELECT request_id FROM confirmed)
                THEN 'confirmed' ELSE confidence END
    FROM exposures WHERE cross_account
    UNION ALL
    SELECT 'receiving', receiver_request_id, leaker_account_id,
           coalesce(verdict, 'reconstructed')
    FROM reconstructed_exposures WHERE cross_account AND verdict IS DISTINCT FROM 'cleared'
    UNION ALL
    SELECT 'leaking', leaker_request_id, receiver_account_id, coalesce(verdict, 'reconstructed')
    FROM reconstructed_exposures WHERE cross_account AND verdict IS DISTINCT FROM 'cleared'
    UNION ALL
    SELECT 'receiving', receiver_request_id, leaker_account_id, 'possible'
    FROM possible_exposures WHERE cross_account
    UNION ALL
    SELECT 'leaking', leaker_request_id, receiver_account_id, 'possible'
    FROM possible_exposures WHERE cross_account
),
per_request AS (
    SELECT side, request_id,
           count(DISTINCT other_account) AS counterpart_accounts,
           max(CASE confidence WHEN 'confirmed' THEN 4 WHEN 'ledger' THEN 3
                               WHEN 'reconstructed' THEN 2 ELSE 1 END) AS rank
    FROM pairs GROUP BY side, request_id
)
SELECT a.side, a.request_id, a.account_id,
       greatest(CASE a.confidence WHEN 'confirmed' THEN 4 WHEN 'ledger' THEN 3
                                  WHEN 'reconstructed' THEN 2 ELSE 1 END,
                coalesce(p.rank, 0)) AS rank,
       a.tokens, a.counterpart_requests,
       coalesce(p.counterpart_accounts, 0) AS counterpart_accounts,
       a.first_affected_at, a.last_affected_at, a.support
FROM affected_requests a
LEFT JOIN per_request p ON p.side = a.side AND p.request_id = a.request_id;
