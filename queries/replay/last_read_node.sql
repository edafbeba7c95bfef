-- Fallback decode node when the request log names none: the node of the request's last read.
SELECT node
FROM kv_events
WHERE request_id = $request_id AND op = 'read'
ORDER BY ts DESC, input_order DESC
LIMIT 1;
