-- Which of the given requests computed prompt positions on this node (a `prefill` write there):
-- only those can have computed their KV over other KV on the node in their own steps.
SELECT DISTINCT request_id
FROM kv_events
WHERE node = $node AND op = 'write' AND source = 'prefill'
  AND list_contains($request_ids, request_id)
ORDER BY request_id;
