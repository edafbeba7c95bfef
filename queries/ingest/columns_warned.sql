-- The warnings of columns not in the contract (forensics.case.columns: no row, no value), for
-- the run summary and the report.
SELECT table_name, "column", reason FROM ingest_warnings
WHERE "row" IS NULL AND "value" IS NULL
ORDER BY table_name, "column";
