-- The delivered response's hash of one request, from the request log.
SELECT response_sha256 FROM work.analysis_requests WHERE request_id = $request_id;
