-- exposures: the sweep's foreign pieces joined back to their events (analysis_piece_events) and
-- requests, coalesced into maximal contiguous slot runs per (receiver, leaker, node, kind).
-- Overlapping pieces (the same slots read again) merge; a new run starts only where a piece
-- begins after every earlier end (run_no, numbered per node by
-- forensics.analysis.coverage.run_numbers). kind: the code's name in $exposure_kinds
-- (forensics.analysis.codes).
-- leaker_part per piece: write source prefill/transfer -> prompt, decode -> generated; with no
-- source, positions below the leaker's prompt_tokens are prompt (all prompt when it is unknown).
DELETE FROM exposures;

INSERT INTO exposures BY NAME
WITH piece AS (
    SELECT p.node, p.run_no, p.receiver_code, p.leaker_code, p.kind_code,
           p.slot_start, p.slot_end,
           we.pos_start + (p.slot_start - we.slot_start) AS pos_lo,
           we.pos_start + (p.slot_end - 1 - we.slot_start) AS pos_hi,
           we.source, re.ts AS read_at, we.ts AS write_at, we.request_id AS leaker_request_id
    FROM temp.analysis_exposure_pieces p
    JOIN temp.analysis_piece_events re ON re.event_key = p.read_key
    JOIN temp.analysis_piece_events we ON we.event_key = p.write_key
), parted AS (
    SELECT piece.*,
           CASE WHEN source IN ('prefill', 'transfer') THEN true
                WHEN source = 'decode' THEN false
                ELSE lr.prompt_tokens IS NULL OR pos_lo < lr.prompt_tokens END AS has_prompt,
           CASE WHEN source IN ('prefill', 'transfer') THEN false
                WHEN source = 'decode' THEN true
                ELSE lr.prompt_tokens IS NOT NULL AND pos_hi >= lr.prompt_tokens END AS has_generated
    FROM piece LEFT JOIN work.analysis_requests lr ON lr.request_id = piece.leaker_request_id
), runs AS (
    SELECT node, receiver_code, leaker_code, kind_code,
           min(slot_start) AS slot_start, max(slot_end) - min(slot_start) AS slot_count,
           min(pos_lo) AS leaker_pos_min, max(pos_hi) AS leaker_pos_max,
           CASE WHEN bool_or(has_prompt) AND bool_or(has_generated) THEN 'mixed'
                WHEN bool_or(has_generated) THEN 'generated' ELSE 'prompt' END AS leaker_part,
           min(read_at) AS first_read_at, max(read_at) AS last_read_at,
           min(write_at) AS first_write_at, max(write_at) AS last_write_at
    FROM parted
    GROUP BY node, run_no, receiver_code, leaker_code, kind_code
)
SELECT rc.request_id AS receiver_request_id, lc.request_id AS leaker_request_id, runs.node,
       ($exposure_kinds)[runs.kind_code + 1] AS kind,
       runs.* EXCLUDE (node, receiver_code, leaker_code, kind_code),
       rr.account_id AS receiver_account_id, lr.account_id AS leaker_account_id,
       rr.account_id <> lr.account_id AS cross_account, 'ledger' AS confidence
FROM runs
JOIN work.analysis_request_codes rc ON rc.req_code = runs.receiver_code
JOIN work.analysis_request_codes lc ON lc.req_code = runs.leaker_code
LEFT JOIN work.analysis_requests rr ON rr.request_id = rc.request_id
LEFT JOIN work.analysis_requests lr ON lr.request_id = lc.request_id
ORDER BY node, receiver_request_id, leaker_request_id, slot_start, kind;
