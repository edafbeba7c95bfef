-- Where the case's ledger is kept when it is outside the database (NULL: it is loaded).
SELECT value FROM case_meta WHERE key = 'ledger_external';
