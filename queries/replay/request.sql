-- The gateway facts replay needs about one request (the first logged row if repeated).
SELECT request_id, prompt_tokens, completion_tokens, response_sha256,
       COALESCE(decode_node, node) AS decode_node, prefill_node
FROM requests
WHERE request_id = $request_id
ORDER BY src_file, src_row
LIMIT 1;
