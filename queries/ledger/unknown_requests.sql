-- Warnings for the checked part $file: its loaded-equivalent rows whose request is not in the
-- request log, one per request (as queries/ingest/unknown_requests.sql does for a loaded file).
SELECT 'kv_events' AS table_name, $file AS file, min(src_row) AS "row", 'request_id' AS "column",
       request_id AS "value", 'request not in the request log (' || count(*) || ' events); kept'
           AS reason
FROM flagged WHERE q IS NULL AND NOT request_known
GROUP BY request_id ORDER BY request_id;
