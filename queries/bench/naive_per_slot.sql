-- The naive per-slot approach docs/DESIGN.md §7 warns about, run by `kvforensics bench` to show the
-- cost of exploding ranges and as an independent check of the analysis: one row per slot of
-- every event, then each read slot joined (ASOF) to the last write of that slot, the reader's
-- last alloc/share/free of it and the writer's, classified by the rules of docs/DESIGN.md §4 slot by
-- slot. It returns its own figures and how many rows of the analysis' read_stats,
-- exposure_tokens and exposures (slots per receiver, node, leaker and kind) differ from them
-- (all 0 when they agree exactly).
WITH node_mode AS (
    SELECT node, count(seq) = count(*) AS by_seq FROM kv_events GROUP BY node
), ordered AS (
    SELECT e.node, e.request_id, e.op, e.slot_start, e.slot_count, e.content_hash,
           row_number() OVER (
               PARTITION BY e.node
               ORDER BY CASE WHEN m.by_seq THEN e.seq ELSE epoch_us(e.ts) END,
                        CASE WHEN m.by_seq THEN 0
                             ELSE list_position(['free', 'alloc', 'share', 'write', 'read'], e.op)
                        END,
                        e.input_order) AS k
    FROM kv_events e JOIN node_mode m USING (node)
), slots AS (
    SELECT node, request_id, op, k, content_hash,
           unnest(range(slot_start, slot_start + slot_count)) AS slot
    FROM ordered
), writes AS (
    SELECT node, slot, k, request_id AS writer, content_hash FROM slots WHERE op = 'write'
), reads AS (
    SELECT node, slot, k, request_id AS reader FROM slots WHERE op = 'read'
), holds AS (
    SELECT node, slot, k, request_id, op, content_hash FROM slots
    WHERE op IN ('alloc', 'share', 'free')
), with_write AS (
    SELECT r.*, w.k AS wk, w.writer, w.content_hash AS write_hash
    FROM reads r ASOF LEFT JOIN writes w ON r.node = w.node AND r.slot = w.slot AND r.k > w.k
), with_reader_hold AS (
    SELECT x.*, h.op AS reader_op, h.k AS reader_k, h.content_hash AS reader_hash
    FROM with_write x ASOF LEFT JOIN holds h
        ON x.node = h.node AND x.slot = h.slot AND x.reader = h.request_id AND x.k > h.k
), with_writer_hold AS (
    SELECT x.*, h.op AS writer_op
    FROM with_reader_hold x ASOF LEFT JOIN holds h
        ON x.node = h.node AND x.slot = h.slot AND x.writer = h.request_id AND x.k > h.k
), per_slot AS (
    SELECT node, slot, reader, writer,
           CASE WHEN writer IS NULL THEN 'uninitialised'
                WHEN writer = reader THEN 'own'
                WHEN reader_op = 'share' AND reader_k > wk AND
                     (reader_hash IS NULL OR write_hash IS NULL) THEN 'shared_unverified'
                WHEN reader_op = 'share' AND reader_k > wk AND reader_hash = write_hash
                    THEN 'shared_verified'
                ELSE 'foreign' END AS category,
           CASE WHEN reader_op = 'share' AND reader_k > wk THEN 'prefix-mismatch'
                WHEN (reader_op IN ('alloc', 'share') AND wk > reader_k)
                     OR writer_op IN ('alloc', 'share') THEN 'overwritten'
                ELSE 'stale' END AS kind
    FROM with_writer_hold
), naive_stats AS (
    SELECT reader AS request_id, node,
           count(DISTINCT slot) FILTER (WHERE category = 'own') AS own_slots,
           count(DISTINCT slot) FILTER (WHERE category = 'shared_verified') AS shared_verified,
           count(DISTINCT slot) FILTER (WHERE category = 'shared_unverified') AS shared_unverified,
           count(DISTINCT slot) FILTER (WHERE category = 'foreign') AS foreign_slots,
           count(DISTINCT slot) FILTER (WHERE category = 'uninitialised') AS uninitialised_slots
    FROM per_slot GROUP BY reader, node
), naive_tokens AS (
    SELECT reader AS receiver_request_id, node, writer AS leaker_request_id,
           count(DISTINCT slot) AS tokens
    FROM per_slot WHERE category = 'foreign' GROUP BY reader, node, writer
), naive_kinds AS (
    SELECT reader AS receiver_request_id, node, writer AS leaker_request_id, kind,
           count(DISTINCT slot) AS slots
    FROM per_slot WHERE category = 'foreign' GROUP BY reader, node, writer, kind
), analysis_kinds AS (
    -- exposures holds disjoint runs per (receiver, leaker, node, kind): their lengths add up
    SELECT receiver_request_id, node, leaker_request_id, kind, sum(slot_count) AS slots
    FROM exposures GROUP BY receiver_request_id, node, leaker_request_id, kind
), analysis_stats AS (
    SELECT request_id, node, own_slots, shared_verified, shared_unverified, foreign_slots,
           uninitialised_slots
    FROM read_stats
), analysis_tokens AS (
    SELECT receiver_request_id, node, leaker_request_id, tokens FROM exposure_tokens
)
SELECT (SELECT count(*) FROM slots) AS slot_rows,
       (SELECT count(*) FROM per_slot WHERE category = 'foreign') AS foreign_slot_reads,
       (SELECT count(*) FROM naive_stats) AS read_stats_rows,
       (SELECT count(*) FROM (FROM naive_stats EXCEPT ALL FROM analysis_stats))
         + (SELECT count(*) FROM (FROM analysis_stats EXCEPT ALL FROM naive_stats))
           AS read_stats_differences,
       (SELECT count(*) FROM naive_tokens) AS exposure_token_rows,
       (SELECT coalesce(sum(tokens), 0) FROM naive_tokens) AS tokens,
       (SELECT count(*) FROM (FROM naive_tokens EXCEPT ALL FROM analysis_tokens))
         + (SELECT count(*) FROM (FROM analysis_tokens EXCEPT ALL FROM naive_tokens))
           AS exposure_token_differences,
       (SELECT count(*) FROM (FROM naive_kinds EXCEPT ALL FROM analysis_kinds))
         + (SELECT count(*) FROM (FROM analysis_kinds EXCEPT ALL FROM naive_kinds))
           AS exposure_kind_differences;
