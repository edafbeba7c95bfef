-- Columns not in the contract: one warning per table and column, on the first file that has it
-- (the reason says how many do).
INSERT INTO ingest_warnings (table_name, file, "row", "column", "value", reason)
SELECT table_name, file, NULL, "column", NULL, reason FROM _ignored_columns
ORDER BY table_name, "column";
