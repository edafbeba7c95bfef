-- receiving_accounts / leaking_accounts (one row per account) as Parquet: times as timestamps in
-- UTC, counts as int64, NULL as null. $list: which list.
SELECT side, account_id, name, contact_email, jurisdiction, confidence, requests, tokens,
       first_affected_at, last_affected_at, counterpart_accounts, notify_by, authority_notify_by,
       notify_rule, notify_basis,
       support, replay_bits
FROM notify_lists
WHERE list = $list
ORDER BY list, CASE side WHEN 'receiving' THEN 0 ELSE 1 END, account_id, request_id;
