-- One statement, nested by queries/ingest/insert_checked.sql and quarantine_checked.sql:
-- type and check staged KV-ledger rows; q is NULL for a good row, else why it is quarantined.
-- The slot range must lie inside the node's pool when the nodes table gives pool_slots; slot and
-- position values stay below 2^40 (far above any pool), so no later sum of them can overflow.
-- node, request_id and source are trimmed once (v_node, v_request_id, v_source) and used by every
-- check, so a value is checked as it is kept. op is taken as it is: the analysis reads an external
-- ledger's ops from its parts untrimmed (trimming each row's would slow every pass over them).
WITH pools AS (
    SELECT node, min(pool_slots) AS pool_slots FROM nodes WHERE pool_slots IS NOT NULL GROUP BY node
), t AS (
    SELECT s.*, kvf_ts(s.ts, $assume_utc) AS v_ts, kvf_int(s.seq) AS v_seq,
           kvf_int(s.slot_start) AS v_slot_start, kvf_int(s.slot_count) AS v_slot_count,
           kvf_int(s.pos_start) AS v_pos_start, p.pool_slots
    FROM (
        SELECT *, kvf_str(node) AS v_node, kvf_str(request_id) AS v_request_id,
               kvf_str(source) AS v_source
        FROM staged
    ) s LEFT JOIN pools p ON p.node = s.v_node
)
SELECT src_row,
    CASE
        WHEN parse_error IS NOT NULL THEN kvf_bad(NULL, raw, parse_error)
        WHEN ts IS NULL THEN kvf_bad('ts', NULL, 'missing required value')
        WHEN v_ts IS NULL THEN kvf_bad('ts', ts, kvf_ts_reason(ts, $assume_utc))
        WHEN seq IS NOT NULL AND v_seq IS NULL THEN kvf_bad('seq', seq, 'seq must be an integer')
        WHEN v_node IS NULL THEN kvf_bad('node', node, 'missing required value')
        WHEN v_request_id IS NULL
            THEN kvf_bad('request_id', request_id, 'missing required value')
        WHEN op IS NULL THEN kvf_bad('op', NULL, 'missing required value')
        WHEN NOT list_contains($ops, op::VARCHAR)
            THEN kvf_bad('op', op, 'op must be one of ' || array_to_string($ops, ', ')
                || CASE WHEN list_contains($ops, kvf_str(op))
                        THEN ': this one is ' || kvf_str(op) || ' with blanks around it, remove them'
                        ELSE '' END)
        WHEN slot_start IS NULL THEN kvf_bad('slot_start', NULL, 'missing required value')
        WHEN v_slot_start IS NULL OR v_slot_start < 0
            THEN kvf_bad('slot_start', slot_start, 'slot_start must be an integer >= 0')
        WHEN slot_count IS NULL THEN kvf_bad('slot_count', NULL, 'missing required value')
        WHEN v_slot_count IS NULL OR v_slot_count <= 0
            THEN kvf_bad('slot_count', slot_count, 'slot_count must be an integer > 0')
        WHEN v_slot_start >= 1099511627776 OR v_slot_count >= 1099511627776
            THEN kvf_bad('slot_count', slot_start::VARCHAR || '+' || slot_count::VARCHAR,
                         'slot range too large: slot_start and slot_count must be below 2^40')
        WHEN pool_slots IS NOT NULL AND v_slot_start + v_slot_count > pool_slots
            THEN kvf_bad('slot_count', slot_start::VARCHAR || '+' || slot_count::VARCHAR,
                         'slot range ends past the node''s pool of ' || pool_slots || ' slots')
        WHEN op::VARCHAR IN ('write', 'read', 'share') AND pos_start IS NULL
            THEN kvf_bad('pos_start', NULL, 'pos_start is required for ' || op)
        WHEN pos_start IS NOT NULL AND (v_pos_start IS NULL OR v_pos_start < 0)
            THEN kvf_bad('pos_start', pos_start, 'pos_start must be an integer >= 0')
        WHEN v_pos_start >= 1099511627776
            THEN kvf_bad('pos_start', pos_start, 'pos_start too large: it must be below 2^40')
        WHEN op = 'write' AND v_source IS NOT NULL
             AND v_source NOT IN ('prefill', 'decode', 'transfer')
            THEN kvf_bad('source', source, 'source must be prefill, decode or transfer')
    END AS q,
    v_ts AS ts, v_seq AS seq, v_node AS node, v_request_id AS request_id, op,
    v_slot_start AS slot_start, v_slot_count AS slot_count, v_pos_start AS pos_start,
    v_source AS source, kvf_str(content_hash) AS content_hash,
    $file_rank * 1099511627776 + src_row AS input_order,
    v_request_id IN (SELECT request_id FROM requests) AS request_known
FROM t
