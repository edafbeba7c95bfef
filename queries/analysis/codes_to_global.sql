-- The partitions' local request codes (registered as _local: request_id, req_code and the
-- partition's index) with their case-wide codes.
SELECT l.partition, l.req_code AS local_code, g.req_code
FROM _local l JOIN work.analysis_request_codes g USING (request_id);
