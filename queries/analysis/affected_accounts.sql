-- affected_accounts: one row per (side, account), cross-account only. requests = distinct
-- requests of the account on that side; tokens = the sum of its requests' token exposures
-- (each (receiver, node, slot, leaker) combination belongs to exactly one request per side;
-- NULL when only screening suggests the account); confidence = the highest of its requests;
-- counterpart_accounts = how many distinct accounts on the other side (ledger, reconstructed or
-- possible); support = the best support share among its reconstructed requests (else NULL).
DELETE FROM affected_accounts;

INSERT INTO affected_accounts BY NAME
WITH counterpart AS (
    SELECT 'receiving' AS side, receiver_account_id AS account_id,
           leaker_account_id AS other FROM exposure_tokens WHERE cross_account
    UNION
    SELECT 'leaking', leaker_account_id, receiver_account_id
    FROM exposure_tokens WHERE cross_account
    UNION
    SELECT 'receiving', receiver_account_id, leaker_account_id
    FROM possible_exposures WHERE cross_account
    UNION
    SELECT 'leaking', leaker_account_id, receiver_account_id
    FROM possible_exposures WHERE cross_account
    UNION
    SELECT 'receiving', receiver_account_id, leaker_account_id
    FROM reconstructed_exposures WHERE cross_account AND verdict IS DISTINCT FROM 'cleared'
    UNION
    SELECT 'leaking', leaker_account_id, receiver_account_id
    FROM reconstructed_exposures WHERE cross_account AND verdict IS DISTINCT FROM 'cleared'
), per_account AS (
    SELECT side, account_id,
           CASE WHEN bool_or(confidence = 'confirmed') THEN 'confirmed'
                WHEN bool_or(confidence = 'ledger') THEN 'ledger'
                WHEN bool_or(confidence = 'reconstructed') THEN 'reconstructed'
                ELSE 'possible' END AS confidence,
           count(DISTINCT request_id) AS requests, sum(tokens) AS tokens,
           min(first_affected_at) AS first_affected_at, max(last_affected_at) AS last_affected_at,
           max(support) AS support
    FROM affected_requests GROUP BY side, account_id
), directory AS (
    SELECT * FROM accounts
    QUALIFY row_number() OVER (PARTITION BY account_id ORDER BY src_file, src_row) = 1
)
SELECT a.*, d.name, d.contact_email, d.jurisdiction,
       (SELECT count(DISTINCT c.other) FROM counterpart c
        WHERE c.side = a.side AND c.account_id = a.account_id) AS counterpart_accounts
FROM per_account a LEFT JOIN directory d USING (account_id)
ORDER BY side, account_id;
