-- Append the Arrow rows registered as _rows_to_append to {table}, by column name
-- (forensics.casedb.sql.append_rows: the quarantine and warnings of an external ledger, its parts,
-- the sweep's findings).
INSERT INTO {table} BY NAME SELECT * FROM _rows_to_append;
