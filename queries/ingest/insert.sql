-- Move the good rows of one staged file into {table}. {checks} is the table's own
-- queries/ingest/validate_<table>.sql (one SELECT; q is NULL for a good row), so the file is
-- read, typed and checked in the same pass that writes it, with no table in between (a ledger
-- part of tens of millions of rows never sits in memory or spills). Returns the rows inserted.
INSERT INTO {table} BY NAME
SELECT * EXCLUDE (q), $file AS src_file FROM ({checks}) WHERE q IS NULL;
