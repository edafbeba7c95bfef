-- The models the request log names for the given requests.
SELECT DISTINCT model
FROM requests
WHERE list_contains($request_ids, request_id)
ORDER BY model;
