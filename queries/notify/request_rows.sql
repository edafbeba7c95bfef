-- The notifiable (cross-account) requests, one row per (side, request), as a TEMP view that
-- notify_requests and notify_accounts read. Base rows come from the analysis' affected_requests;
-- the confidence is raised to the best found in exposures (replay may mark them 'confirmed') or
-- in replay_results for the receiver (ranks: confirmed 4, ledger 3, reconstructed 2, possible 1;
-- support is the reconstructed share of explored orders); counterpart_accounts counts the distinct other accounts,
-- never naming them. replay_bits: the evidence in bits (replay_results.evidence_bits, the best
-- over runs with the logged model, to 2 decimals) of a receiving request's own replay, and of a
-- leaking request the best of the replays of the receivers that read its KV; NULL where no
-- replay ran (or none weighed evidence).
CREATE OR REPLACE TEMP VIEW notify_request_rows AS
WITH confirmed AS (
    SELECT DISTINCT request_id FROM replay_results
    WHERE verdict = 'confirmed' AND COALESCE(model_matches, true)  -- runs with the logged model
),
bits AS (
    SELECT request_id, round(max(evidence_bits), 2) AS bits FROM replay_results
    WHERE COALESCE(model_matches, true) AND evidence_bits IS NOT NULL
    GROUP BY request_id
),
pairs AS (
    SELECT 'receiving' AS side, receiver_request_id AS request_id,
           leaker_account_id AS other_account,
           CASE WHEN receiver_request_id IN (SELECT request_id FROM confirmed)
                THEN 'confirmed' ELSE confidence END AS confidence,
           receiver_request_id AS receiver
    FROM exposures WHERE cross_account
    UNION ALL
    SELECT 'leaking', leaker_request_id, receiver_account_id,
           CASE WHEN receiver_request_id IN (SELECT request_id FROM confirmed)
                THEN 'confirmed' ELSE confidence END, receiver_request_id
    FROM exposures WHERE cross_account
    UNION ALL
    SELECT 'receiving', receiver_request_id, leaker_account_id,
           coalesce(verdict, 'reconstructed'), receiver_request_id
    FROM reconstructed_exposures WHERE cross_account AND verdict IS DISTINCT FROM 'cleared'
    UNION ALL
    SELECT 'leaking', leaker_request_id, receiver_account_id, coalesce(verdict, 'reconstructed'),
           receiver_request_id
    FROM reconstructed_exposures WHERE cross_account AND verdict IS DISTINCT FROM 'cleared'
    UNION ALL
    SELECT 'receiving', receiver_request_id, leaker_account_id, 'possible', receiver_request_id
    FROM possible_exposures WHERE cross_account
    UNION ALL
    SELECT 'leaking', leaker_request_id, receiver_account_id, 'possible', receiver_request_id
    FROM possible_exposures WHERE cross_account
),
per_request AS (
    SELECT side, pairs.request_id,
           count(DISTINCT other_account) AS counterpart_accounts,
           max(CASE confidence WHEN 'confirmed' THEN 4 WHEN 'ledger' THEN 3
                               WHEN 'reconstructed' THEN 2 ELSE 1 END) AS rank,
           max(b.bits) AS leaked_bits
    FROM pairs LEFT JOIN bits b ON b.request_id = pairs.receiver
    GROUP BY side, pairs.request_id
)
SELECT a.side, a.request_id, a.account_id,
       greatest(CASE a.confidence WHEN 'confirmed' THEN 4 WHEN 'ledger' THEN 3
                                  WHEN 'reconstructed' THEN 2 ELSE 1 END,
                coalesce(p.rank, 0)) AS rank,
       a.tokens, a.counterpart_requests,
       coalesce(p.counterpart_accounts, 0) AS counterpart_accounts,
       a.first_affected_at, a.last_affected_at, a.support,
       CASE a.side WHEN 'receiving' THEN own.bits ELSE p.leaked_bits END AS replay_bits
FROM affected_requests a
LEFT JOIN per_request p ON p.side = a.side AND p.request_id = a.request_id
LEFT JOIN bits own ON own.request_id = a.request_id;
