-- One statement, nested by queries/ingest/insert_checked.sql and quarantine_checked.sql:
-- type and check staged accounts rows; q is NULL for a good row, else why it is quarantined.
-- Text is kept without blanks around it, as every table keeps its text (kvf_str): a name or
-- address with a blank before it (a CSV written `a, b, c`) would reach a notice as it is, and a
-- jurisdiction ` EU` would count apart from `EU`.
SELECT src_row,
    CASE
        WHEN parse_error IS NOT NULL THEN kvf_bad(NULL, raw, parse_error)
        WHEN kvf_str(account_id) IS NULL
            THEN kvf_bad('account_id', account_id, 'missing required value')
    END AS q,
    kvf_str(account_id) AS account_id, kvf_str(name) AS name,
    kvf_str(contact_email) AS contact_email, kvf_str(jurisdiction) AS jurisdiction
FROM staged
