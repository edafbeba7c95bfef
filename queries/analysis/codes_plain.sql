-- Whether every request id and content hash the codes name (work.analysis_request_codes and
-- work.analysis_hash_codes, made from a partition's kv_events view that reads them as they are)
-- is a value kvf_str keeps as it is: no blanks around it, not blank. Then the view's values are
-- those ingest keeps, without trimming each row (forensics.analysis.partitions).
SELECT NOT EXISTS (SELECT 1 FROM work.analysis_request_codes
                   WHERE request_id IS DISTINCT FROM kvf_str(request_id))
   AND NOT EXISTS (SELECT 1 FROM work.analysis_hash_codes
                   WHERE content_hash IS DISTINCT FROM kvf_str(content_hash)) AS plain;
