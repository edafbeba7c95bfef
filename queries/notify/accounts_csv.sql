-- receiving_accounts / leaking_accounts (one row per account) as CSV: every text cell through
-- kvf_csv_cell (spreadsheet-safe), times as ISO-8601 UTC with a Z, NULL as an empty cell, counts
-- as integers. $list: which list.
SELECT kvf_csv_cell(side) AS side, kvf_csv_cell(account_id) AS account_id,
       kvf_csv_cell(name) AS name, kvf_csv_cell(contact_email) AS contact_email,
       kvf_csv_cell(jurisdiction) AS jurisdiction, kvf_csv_cell(confidence) AS confidence,
       requests, tokens, kvf_iso(first_affected_at) AS first_affected_at,
       kvf_iso(last_affected_at) AS last_affected_at, counterpart_accounts,
       kvf_iso(notify_by) AS notify_by, kvf_iso(authority_notify_by) AS authority_notify_by,
       kvf_csv_cell(notify_rule) AS notify_rule, kvf_csv_cell(notify_basis) AS notify_basis,
       support, replay_bits
FROM notify_lists
WHERE list = $list
ORDER BY list, CASE side WHEN 'receiving' THEN 0 ELSE 1 END, account_id, request_id;
