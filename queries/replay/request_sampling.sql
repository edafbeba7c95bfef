-- The request log's sampling settings for one request (optional columns; the first logged row
-- if repeated): replay scores the delivered output at its temperature.
SELECT temperature, top_p, top_k, seed
FROM requests
WHERE request_id = $request_id
ORDER BY src_file, src_row
LIMIT 1;
