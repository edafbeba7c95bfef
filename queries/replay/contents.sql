-- Kept content of the given requests (the first row per request if repeated), with the billed
-- prompt length from the request log (a stub's generated tokens sit after the billed prompt).
SELECT c.request_id, c.prompt_token_ids, c.output_token_ids, c.processed_token_ids,
       r.prompt_tokens
FROM contents c
LEFT JOIN requests r ON r.request_id = c.request_id
WHERE list_contains($request_ids, c.request_id)
QUALIFY row_number() OVER (PARTITION BY c.request_id ORDER BY c.src_file, c.src_row,
                                                               r.src_file, r.src_row) = 1
ORDER BY c.request_id;
