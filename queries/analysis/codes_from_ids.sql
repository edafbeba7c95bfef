-- Case-wide request codes from the request ids of the partitions (registered as _ids): the same
-- numbering as queries/analysis/codes.sql gives over a loaded ledger.
CREATE SCHEMA IF NOT EXISTS work;

CREATE OR REPLACE TABLE work.analysis_request_codes AS
SELECT request_id, CAST(row_number() OVER (ORDER BY request_id) - 1 AS INTEGER) AS req_code
FROM (SELECT DISTINCT request_id FROM _ids);
