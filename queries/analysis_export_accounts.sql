-- OUT/notifications/<side>_accounts.csv: one row per cross-account affected account.
SELECT account_id, name, contact_email, jurisdiction, confidence, requests, tokens,
       first_affected_at, last_affected_at, counterpart_accounts
FROM affected_accounts
WHERE side = $side
ORDER BY account_id;
