-- One statement, nested by queries/ingest/insert_checked.sql and quarantine_checked.sql:
-- type and check staged accounts rows; q is NULL for a good row, else why it is quarantined.
SELECT src_row,
    CASE
        WHEN parse_error IS NOT NULL THEN kvf_bad(NULL, raw, parse_error)
        WHEN kvf_str(account_id) IS NULL
            THEN kvf_bad('account_id', account_id, 'missing required value')
    END AS q,
    kvf_str(account_id) AS account_id, name, contact_email, jurisdiction
FROM staged
