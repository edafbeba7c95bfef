-- The sweep's arrays for one node: its events in their total order.
SELECT req_code, op_code, slot_start, slot_count, hash_code
FROM analysis_events
WHERE node = $node
ORDER BY ord;
