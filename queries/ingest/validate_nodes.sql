-- One statement, nested by queries/ingest/insert_checked.sql and quarantine_checked.sql:
-- type and check staged nodes rows; q is NULL for a good row, else why it is quarantined.
-- Text is checked and kept without blanks around it, as every table keeps its text (kvf_str).
WITH t AS (
    SELECT *, kvf_str(role) AS v_role, kvf_int(page_size) AS v_page_size,
           kvf_int(pool_slots) AS v_pool_slots, kvf_int(context_len) AS v_context_len, kvf_ts(started_at, $assume_utc) AS v_started_at
    FROM staged
)
SELECT src_row,
    CASE
        WHEN parse_error IS NOT NULL THEN kvf_bad(NULL, raw, parse_error)
        WHEN kvf_str(node) IS NULL THEN kvf_bad('node', node, 'missing required value')
        WHEN v_role IS NOT NULL AND v_role NOT IN ('prefill', 'decode', 'unified')
            THEN kvf_bad('role', role, 'role must be prefill, decode or unified')
        WHEN page_size IS NOT NULL AND (v_page_size IS NULL OR v_page_size <= 0)
            THEN kvf_bad('page_size', page_size, 'page_size must be a positive integer')
        WHEN pool_slots IS NOT NULL AND (v_pool_slots IS NULL OR v_pool_slots <= 0)
            THEN kvf_bad('pool_slots', pool_slots, 'pool_slots must be a positive integer')
        WHEN context_len IS NOT NULL AND (v_context_len IS NULL OR v_context_len <= 0)
            THEN kvf_bad('context_len', context_len, 'context_len must be a positive integer')
        WHEN started_at IS NOT NULL AND v_started_at IS NULL
            THEN kvf_bad('started_at', started_at, kvf_ts_reason(started_at, $assume_utc))
    END AS q,
    kvf_str(node) AS node, v_role AS role, kvf_str(model) AS model, kvf_str(engine) AS engine,
    kvf_str(engine_version) AS engine_version, v_page_size AS page_size,
    v_pool_slots AS pool_slots, v_context_len AS context_len, v_started_at AS started_at
FROM t
