-- Kept content of the given requests (the first row per request if repeated).
SELECT request_id, prompt_token_ids, output_token_ids, processed_token_ids
FROM contents
WHERE list_contains($request_ids, request_id)
QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY src_file, src_row) = 1
ORDER BY request_id;
