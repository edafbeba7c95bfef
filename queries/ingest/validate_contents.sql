-- One statement, nested by queries/ingest/insert_checked.sql and quarantine_checked.sql:
-- type and check staged contents rows (token id lists as JSON arrays of integers >= 0).
WITH t AS (
    SELECT *, kvf_ids(prompt_token_ids) AS v_prompt, kvf_ids(output_token_ids) AS v_output,
           kvf_ids(processed_token_ids) AS v_processed
    FROM staged
)
SELECT src_row,
    CASE
        WHEN parse_error IS NOT NULL THEN kvf_bad(NULL, raw, parse_error)
        WHEN kvf_str(request_id) IS NULL
            THEN kvf_bad('request_id', request_id, 'missing required value')
        WHEN prompt_token_ids IS NOT NULL AND v_prompt IS NULL
            THEN kvf_bad('prompt_token_ids', left(prompt_token_ids::VARCHAR, 200),
                         'must be a JSON array of integers >= 0, e.g. [1, 2, 3]')
        WHEN output_token_ids IS NOT NULL AND v_output IS NULL
            THEN kvf_bad('output_token_ids', left(output_token_ids::VARCHAR, 200),
                         'must be a JSON array of integers >= 0, e.g. [1, 2, 3]')
        WHEN processed_token_ids IS NOT NULL AND v_processed IS NULL
            THEN kvf_bad('processed_token_ids', left(processed_token_ids::VARCHAR, 200),
                         'must be a JSON array of integers >= 0, e.g. [1, 2, 3]')
    END AS q,
    kvf_str(request_id) AS request_id, v_prompt AS prompt_token_ids, v_output AS output_token_ids,
    v_processed AS processed_token_ids
FROM t
