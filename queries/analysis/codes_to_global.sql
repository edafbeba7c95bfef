-- A partition's local request codes (registered as _local) with their case-wide codes.
SELECT l.req_code AS local_code, g.req_code
FROM _local l JOIN work.analysis_request_codes g USING (request_id);
