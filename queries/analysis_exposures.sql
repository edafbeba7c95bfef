-- exposures: the sweep's foreign pieces joined back to events and requests, coalesced into
-- maximal contiguous slot runs per (receiver, leaker, node, kind). Overlapping pieces (the same
-- slots read again) merge; a new run starts only where a piece begins after every earlier end.
-- leaker_part per piece: write source prefill/transfer -> prompt, decode -> generated; with no
-- source, positions below the leaker's prompt_tokens are prompt (all prompt when it is unknown).
DELETE FROM exposures;

INSERT INTO exposures BY NAME
WITH piece AS (
    SELECT re.request_id AS receiver_request_id, we.request_id AS leaker_request_id, p.node,
           ['stale', 'overwritten', 'prefix-mismatch'][p.kind_code + 1] AS kind,
           p.slot_start, p.slot_end,
           we.pos_start + (p.slot_start - we.slot_start) AS pos_lo,
           we.pos_start + (p.slot_end - 1 - we.slot_start) AS pos_hi,
           we.source, re.ts AS read_at, we.ts AS write_at
    FROM analysis_exposure_pieces p
    JOIN kv_events re ON re.input_order = p.read_key
    JOIN kv_events we ON we.input_order = p.write_key
), parted AS (
    SELECT piece.*,
           CASE WHEN source IN ('prefill', 'transfer') THEN true
                WHEN source = 'decode' THEN false
                ELSE lr.prompt_tokens IS NULL OR pos_lo < lr.prompt_tokens END AS has_prompt,
           CASE WHEN source IN ('prefill', 'transfer') THEN false
                WHEN source = 'decode' THEN true
                ELSE lr.prompt_tokens IS NOT NULL AND pos_hi >= lr.prompt_tokens END AS has_generated
    FROM piece LEFT JOIN analysis_requests lr ON lr.request_id = piece.leaker_request_id
), reach AS (
    SELECT *, max(slot_end) OVER (
        PARTITION BY receiver_request_id, leaker_request_id, node, kind
        ORDER BY slot_start, slot_end ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS reach_before
    FROM parted
), island AS (
    SELECT *, sum(CASE WHEN reach_before IS NULL OR slot_start > reach_before THEN 1 ELSE 0 END)
        OVER (PARTITION BY receiver_request_id, leaker_request_id, node, kind
              ORDER BY slot_start, slot_end ROWS UNBOUNDED PRECEDING) AS run_no
    FROM reach
), runs AS (
    SELECT receiver_request_id, leaker_request_id, node, kind,
           min(slot_start) AS slot_start, max(slot_end) - min(slot_start) AS slot_count,
           min(pos_lo) AS leaker_pos_min, max(pos_hi) AS leaker_pos_max,
           CASE WHEN bool_or(has_prompt) AND bool_or(has_generated) THEN 'mixed'
                WHEN bool_or(has_generated) THEN 'generated' ELSE 'prompt' END AS leaker_part,
           min(read_at) AS first_read_at, max(read_at) AS last_read_at,
           min(write_at) AS first_write_at, max(write_at) AS last_write_at
    FROM island
    GROUP BY receiver_request_id, leaker_request_id, node, kind, run_no
)
SELECT runs.*, rr.account_id AS receiver_account_id, lr.account_id AS leaker_account_id,
       rr.account_id <> lr.account_id AS cross_account, 'ledger' AS confidence
FROM runs
LEFT JOIN analysis_requests rr ON rr.request_id = runs.receiver_request_id
LEFT JOIN analysis_requests lr ON lr.request_id = runs.leaker_request_id
ORDER BY node, receiver_request_id, leaker_request_id, slot_start, kind;
