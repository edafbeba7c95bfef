-- Rows of the checked part that carry seq (quarantined ones included: ledger/seq_rows_bad.sql
-- counts those). A kept row's seq is an integer or absent, so its raw value being present is
-- the same as its typed one.
SELECT count(seq) FROM staged;
