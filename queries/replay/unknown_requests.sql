-- The named request ids that the request log does not hold.
SELECT DISTINCT id
FROM unnest($request_ids) AS t(id)
WHERE id NOT IN (SELECT request_id FROM requests)
ORDER BY id;
