-- One statement, nested by queries/ingest/insert_checked.sql and quarantine_checked.sql:
-- type and check staged request-log rows; q is NULL for a good row, else why it is quarantined.
-- Text is kept without blanks around it (a log written `r1, acct-1, ...` loads as `r1,acct-1`);
-- a blank response_sha256 is none. Sampling settings, where given: temperature a number >= 0,
-- top_p a number in (0, 1], top_k and seed whole numbers (top_k 0 or less: no top-k).
WITH t AS (
    SELECT *, kvf_ts(received_at, $assume_utc) AS v_received_at,
           kvf_ts(first_token_at, $assume_utc) AS v_first_token_at,
           kvf_ts(completed_at, $assume_utc) AS v_completed_at,
           kvf_int(http_status) AS v_http_status, kvf_int(prompt_tokens) AS v_prompt_tokens,
           kvf_int(completion_tokens) AS v_completion_tokens,
           kvf_int(cached_tokens) AS v_cached_tokens,
           kvf_str(response_sha256) AS v_response_sha256,
           TRY_CAST(kvf_str(temperature::VARCHAR) AS DOUBLE) AS v_temperature,
           TRY_CAST(kvf_str(top_p::VARCHAR) AS DOUBLE) AS v_top_p,
           kvf_int(top_k) AS v_top_k, kvf_int(seed) AS v_seed
    FROM staged
)
SELECT src_row,
    CASE
        WHEN parse_error IS NOT NULL THEN kvf_bad(NULL, raw, parse_error)
        WHEN kvf_str(request_id) IS NULL
            THEN kvf_bad('request_id', request_id, 'missing required value')
        WHEN kvf_str(account_id) IS NULL
            THEN kvf_bad('account_id', account_id, 'missing required value')
        WHEN kvf_str(model) IS NULL THEN kvf_bad('model', model, 'missing required value')
        WHEN received_at IS NULL THEN kvf_bad('received_at', NULL, 'missing required value')
        WHEN v_received_at IS NULL
            THEN kvf_bad('received_at', received_at, kvf_ts_reason(received_at, $assume_utc))
        WHEN first_token_at IS NOT NULL AND v_first_token_at IS NULL
            THEN kvf_bad('first_token_at', first_token_at, kvf_ts_reason(first_token_at, $assume_utc))
        WHEN completed_at IS NOT NULL AND v_completed_at IS NULL
            THEN kvf_bad('completed_at', completed_at, kvf_ts_reason(completed_at, $assume_utc))
        WHEN http_status IS NULL THEN kvf_bad('http_status', NULL, 'missing required value')
        WHEN v_http_status IS NULL OR v_http_status NOT BETWEEN 100 AND 599
            THEN kvf_bad('http_status', http_status, 'http_status must be an integer 100-599')
        WHEN prompt_tokens IS NULL THEN kvf_bad('prompt_tokens', NULL, 'missing required value')
        WHEN v_prompt_tokens IS NULL OR v_prompt_tokens < 0
            THEN kvf_bad('prompt_tokens', prompt_tokens, 'prompt_tokens must be an integer >= 0')
        WHEN completion_tokens IS NOT NULL AND (v_completion_tokens IS NULL OR v_completion_tokens < 0)
            THEN kvf_bad('completion_tokens', completion_tokens,
                         'completion_tokens must be an integer >= 0')
        WHEN cached_tokens IS NOT NULL AND (v_cached_tokens IS NULL OR v_cached_tokens < 0)
            THEN kvf_bad('cached_tokens', cached_tokens, 'cached_tokens must be an integer >= 0')
        WHEN v_response_sha256 IS NOT NULL
             AND NOT regexp_full_match(v_response_sha256, '[0-9a-fA-F]{64}')
            THEN kvf_bad('response_sha256', response_sha256, 'response_sha256 must be 64 hex digits')
        WHEN kvf_str(temperature::VARCHAR) IS NOT NULL
             AND (v_temperature IS NULL OR NOT isfinite(v_temperature) OR v_temperature < 0)
            THEN kvf_bad('temperature', temperature::VARCHAR, 'temperature must be a number >= 0')
        WHEN kvf_str(top_p::VARCHAR) IS NOT NULL
             AND (v_top_p IS NULL OR NOT (v_top_p > 0 AND v_top_p <= 1))
            THEN kvf_bad('top_p', top_p::VARCHAR, 'top_p must be a number in (0, 1]')
        WHEN kvf_str(top_k::VARCHAR) IS NOT NULL AND v_top_k IS NULL
            THEN kvf_bad('top_k', top_k::VARCHAR, 'top_k must be an integer')
        WHEN kvf_str(seed::VARCHAR) IS NOT NULL AND v_seed IS NULL
            THEN kvf_bad('seed', seed::VARCHAR, 'seed must be an integer')
    END AS q,
    kvf_str(request_id) AS request_id, kvf_str(account_id) AS account_id, kvf_str(model) AS model,
    v_received_at AS received_at, v_first_token_at AS first_token_at,
    v_completed_at AS completed_at, TRY_CAST(v_http_status AS INTEGER) AS http_status,
    v_prompt_tokens AS prompt_tokens, v_completion_tokens AS completion_tokens,
    kvf_str(prefill_node) AS prefill_node, kvf_str(decode_node) AS decode_node,
    kvf_str(node) AS node, lower(v_response_sha256) AS response_sha256,
    v_cached_tokens AS cached_tokens, v_temperature AS temperature, v_top_p AS top_p,
    v_top_k AS top_k, v_seed AS seed
FROM t
