-- The three notification lists, typed, as one TEMP table (list = receiving_accounts |
-- leaking_accounts | affected_requests), read by the notify_{accounts,requests}_* queries that
-- write the files. Needs the TEMP view notify_request_rows and the TEMP table notify_rules.
-- $aware_at: the awareness time (NULL: the deadline columns stay NULL).
-- Deadline rule per account: its jurisdiction code exactly (ignoring case and blanks), else the
-- part before the first '-', else the default '*'. replay_bits: a request's evidence in bits
-- (notify_request_rows), an account's the best of its requests on that side.
CREATE OR REPLACE TEMP TABLE notify_lists AS
WITH directory AS (
    SELECT account_id,
           arg_min(name, (src_file, src_row)) AS name,
           arg_min(contact_email, (src_file, src_row)) AS contact_email,
           arg_min(jurisdiction, (src_file, src_row)) AS jurisdiction
    FROM accounts GROUP BY account_id
),
best AS (
    SELECT side, account_id, max(rank) AS rank, max(replay_bits) AS replay_bits
    FROM notify_request_rows GROUP BY side, account_id
),
account_rows AS (
    SELECT a.side || '_accounts' AS list, a.side, NULL::VARCHAR AS request_id, a.account_id,
           coalesce(a.name, d.name) AS name,
           coalesce(a.contact_email, d.contact_email) AS contact_email,
           coalesce(a.jurisdiction, d.jurisdiction) AS jurisdiction,
           CASE greatest(CASE a.confidence WHEN 'confirmed' THEN 4 WHEN 'ledger' THEN 3
                                           WHEN 'reconstructed' THEN 2 ELSE 1 END,
                         coalesce(b.rank, 0))
                WHEN 4 THEN 'confirmed' WHEN 3 THEN 'ledger' WHEN 2 THEN 'reconstructed'
                ELSE 'possible' END AS confidence,
           CAST(a.requests AS BIGINT) AS requests, CAST(a.tokens AS BIGINT) AS tokens,
           a.first_affected_at::TIMESTAMPTZ AS first_affected_at,
           a.last_affected_at::TIMESTAMPTZ AS last_affected_at,
           CAST(a.counterpart_accounts AS BIGINT) AS counterpart_accounts,
           NULL::BIGINT AS counterpart_requests, CAST(a.support AS DOUBLE) AS support,
           CAST(b.replay_bits AS DOUBLE) AS replay_bits
    FROM affected_accounts a
    LEFT JOIN directory d USING (account_id)
    LEFT JOIN best b ON b.side = a.side AND b.account_id = a.account_id
),
request_rows AS (
    SELECT 'affected_requests' AS list, r.side, r.request_id, r.account_id, d.name,
           d.contact_email, d.jurisdiction,
           CASE r.rank WHEN 4 THEN 'confirmed' WHEN 3 THEN 'ledger' WHEN 2 THEN 'reconstructed'
                       ELSE 'possible' END,
           CAST(1 AS BIGINT), CAST(r.tokens AS BIGINT),
           r.first_affected_at::TIMESTAMPTZ, r.last_affected_at::TIMESTAMPTZ,
           CAST(r.counterpart_accounts AS BIGINT), CAST(r.counterpart_requests AS BIGINT),
           CAST(r.support AS DOUBLE), CAST(r.replay_bits AS DOUBLE)
    FROM notify_request_rows r
    LEFT JOIN directory d USING (account_id)
),
rows AS (
    SELECT * FROM account_rows UNION ALL SELECT * FROM request_rows
),
ruled AS (
    SELECT rows.*,
           coalesce(exact.jurisdiction, prefix.jurisdiction, fallback.jurisdiction) AS notify_rule,
           CASE WHEN exact.jurisdiction IS NOT NULL THEN exact
                WHEN prefix.jurisdiction IS NOT NULL THEN prefix ELSE fallback END AS rule
    FROM rows
    LEFT JOIN notify_rules exact
        ON exact.jurisdiction = upper(trim(rows.jurisdiction))
    LEFT JOIN notify_rules prefix
        ON prefix.jurisdiction = split_part(upper(trim(rows.jurisdiction)), '-', 1)
    JOIN notify_rules fallback ON fallback.jurisdiction = '*'
)
SELECT list, side, request_id, account_id, name, contact_email, jurisdiction, confidence,
       requests, tokens, first_affected_at, last_affected_at, counterpart_accounts,
       kvf_plus_hours($aware_at::TIMESTAMPTZ, rule.notify_within_hours) AS notify_by,
       kvf_plus_hours($aware_at::TIMESTAMPTZ, rule.authority_within_hours) AS authority_notify_by,
       notify_rule, rule.basis AS notify_basis, counterpart_requests, support, replay_bits
FROM ruled
ORDER BY list, CASE side WHEN 'receiving' THEN 0 ELSE 1 END, account_id, request_id;
