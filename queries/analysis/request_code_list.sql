-- A partition task's request codes (forensics.analysis.partitions), returned to the driver.
SELECT request_id, req_code FROM work.analysis_request_codes ORDER BY req_code;
