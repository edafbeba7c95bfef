-- Integer codes for the compiled sweep, dense over the whole case and in a fixed order:
-- request ids (work.analysis_request_codes, from temp.analysis_request_nodes:
-- queries/analysis/request_nodes.sql runs first) and content hashes (work.analysis_hash_codes).
CREATE SCHEMA IF NOT EXISTS work;  -- the analysis' working tables, apart from results

CREATE OR REPLACE TABLE work.analysis_request_codes AS
SELECT request_id, CAST(row_number() OVER (ORDER BY request_id) - 1 AS INTEGER) AS req_code
FROM (SELECT DISTINCT request_id FROM temp.analysis_request_nodes);

CREATE OR REPLACE TABLE work.analysis_hash_codes AS
SELECT content_hash, CAST(row_number() OVER (ORDER BY content_hash) - 1 AS INTEGER) AS hash_code
FROM (SELECT DISTINCT content_hash FROM kv_events WHERE content_hash IS NOT NULL);
