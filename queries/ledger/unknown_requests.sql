-- Warnings for the checked parts (_parts: rank, rel): the kept rows whose request is not in the
-- request log, one per part and request, at the request's first row in the part (as
-- queries/ingest/unknown_requests.sql does for a loaded file).
SELECT 'kv_events' AS table_name, p.rel AS file, c.key_min % 1099511627776 AS "row",
       'request_id' AS "column", c.unknown_request AS "value",
       'request not in the request log (' || c.events || ' events); kept' AS reason
FROM checked c JOIN _parts p ON p.rank = c.part_rank
WHERE c.unknown_request IS NOT NULL
ORDER BY c.part_rank, c.unknown_request;
