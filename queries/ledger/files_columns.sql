-- The columns of ledger_files, which tell whether ingest recorded each part's facts there.
SELECT * FROM ledger_files LIMIT 0;
