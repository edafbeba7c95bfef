-- affected_requests export for one side ($1): one row per request, with the account directory.
WITH directory AS (
    SELECT account_id,
           arg_min(name, (src_file, src_row)) AS name,
           arg_min(contact_email, (src_file, src_row)) AS contact_email,
           arg_min(jurisdiction, (src_file, src_row)) AS jurisdiction
    FROM accounts GROUP BY account_id
)
SELECT r.side, r.request_id, r.account_id, d.name, d.contact_email, d.jurisdiction,
       CASE r.rank WHEN 4 THEN 'confirmed' WHEN 3 THEN 'ledger' WHEN 2 THEN 'reconstructed'
                   ELSE 'possible' END AS confidence, r.support,
       1 AS requests, r.tokens, r.first_affected_at, r.last_affected_at,
       r.counterpart_accounts, r.counterpart_requests
FROM notify_request_rows r
LEFT JOIN directory d USING (account_id)
WHERE r.side = $1
ORDER BY r.account_id, r.request_id;
