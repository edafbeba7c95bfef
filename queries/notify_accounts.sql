-- receiving_accounts / leaking_accounts export for one side ($1): one row per account from the
-- analysis' affected_accounts, the directory filling gaps, the confidence the best of its
-- requests (after replay).
WITH directory AS (
    SELECT account_id,
           arg_min(name, (src_file, src_row)) AS name,
           arg_min(contact_email, (src_file, src_row)) AS contact_email,
           arg_min(jurisdiction, (src_file, src_row)) AS jurisdiction
    FROM accounts GROUP BY account_id
),
best AS (
    SELECT side, account_id, max(rank) AS rank FROM notify_request_rows GROUP BY side, account_id
)
SELECT a.side, a.account_id,
       coalesce(a.name, d.name) AS name,
       coalesce(a.contact_email, d.contact_email) AS contact_email,
       coalesce(a.jurisdiction, d.jurisdiction) AS jurisdiction,
       CASE greatest(CASE a.confidence WHEN 'confirmed' THEN 4 WHEN 'ledger' THEN 3
                                       WHEN 'reconstructed' THEN 2 ELSE 1 END,
                     coalesce(b.rank, 0))
            WHEN 4 THEN 'confirmed' WHEN 3 THEN 'ledger' WHEN 2 THEN 'reconstructed'
            ELSE 'possible' END AS confidence, a.support,
       a.requests, a.tokens, a.first_affected_at, a.last_affected_at, a.counterpart_accounts
FROM affected_accounts a
LEFT JOIN directory d USING (account_id)
LEFT JOIN best b ON b.side = a.side AND b.account_id = a.account_id
WHERE a.side = $1
ORDER BY a.account_id;
