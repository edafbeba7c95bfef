-- The sweep's arrays: every node's events in order (node, ord).
SELECT node, req_code, op_code, slot_start, slot_count, hash_code
FROM analysis_events
ORDER BY node, ord;
