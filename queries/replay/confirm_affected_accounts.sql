-- affected_accounts: `confirmed` when any of the account's requests on that side is.
UPDATE affected_accounts AS acc
SET confidence = CASE
    WHEN EXISTS (SELECT 1 FROM affected_requests q
                 WHERE q.side = acc.side AND q.account_id = acc.account_id
                   AND q.confidence = 'confirmed') THEN 'confirmed'
    WHEN acc.confidence = 'confirmed' THEN CASE WHEN acc.tokens IS NULL THEN 'possible'
                                                ELSE 'ledger' END
    ELSE acc.confidence END;
