-- Append rows registered as _ledger_rows to {table} (quarantine, ingest_warnings,
-- ledger_files) by column name.
INSERT INTO {table} BY NAME SELECT * FROM _ledger_rows;
