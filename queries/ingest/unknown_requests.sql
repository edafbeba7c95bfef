-- kv_events whose request is not in the request log are kept and flagged: one warning per
-- (file, request) naming the first row and the number of events.
INSERT INTO ingest_warnings
SELECT 'kv_events', src_file, min(src_row), 'request_id', request_id,
       'request not in the request log (' || count(*) || ' events); kept'
FROM kv_events WHERE NOT request_known
GROUP BY src_file, request_id ORDER BY src_file, request_id;
