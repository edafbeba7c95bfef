-- affected_requests (one row per side and request) as JSON: times as ISO-8601 UTC with a Z, NULL as
-- null, counts as integers. $list: which list.
SELECT side, request_id, account_id, name, contact_email, jurisdiction, confidence, requests,
       tokens, kvf_iso(first_affected_at) AS first_affected_at,
       kvf_iso(last_affected_at) AS last_affected_at, counterpart_accounts,
       kvf_iso(notify_by) AS notify_by, kvf_iso(authority_notify_by) AS authority_notify_by,
       notify_rule, notify_basis, support, counterpart_requests, replay_bits
FROM notify_lists
WHERE list = $list
ORDER BY list, CASE side WHEN 'receiving' THEN 0 ELSE 1 END, account_id, request_id;
