-- exposures: the sweep's foreign pieces joined back to their events (analysis_piece_events) and
-- requests, coalesced into maximal contiguous slot runs per (receiver, leaker, node, kind).
-- Overlapping pieces (the same slots read again) merge; a new run starts only where a piece
-- begins after every earlier end (run_no, numbered per node by
-- forensics.analysis.coverage.run_numbers). kind: the code's name in $exposure_kinds
-- (forensics.analysis.codes).
-- leaker_part: write source prefill/transfer -> prompt, decode -> generated; with another or no
-- source, positions below the leaker's prompt_tokens are prompt (all prompt when it is unknown).
-- A run's pieces all have the run's leaker, so each run keeps, for its pieces of another or no
-- source, their count and their lowest and highest position, and is judged against its
-- leaker's prompt_tokens once it is grouped: the same as judging every piece, and the
-- request log is joined once per run instead of once per piece.
DELETE FROM exposures;

INSERT INTO exposures BY NAME
WITH piece AS (
    SELECT p.node, p.run_no, p.receiver_code, p.leaker_code, p.kind_code,
           p.slot_start, p.slot_end,
           we.pos_start + (p.slot_start - we.slot_start) AS pos_lo,
           we.pos_start + (p.slot_end - 1 - we.slot_start) AS pos_hi,
           coalesce(we.source IN ('prefill', 'transfer', 'decode'), false) AS known_source,
           we.source, re.ts AS read_at, we.ts AS write_at
    FROM temp.analysis_exposure_pieces p
    JOIN temp.analysis_piece_events re ON re.event_key = p.read_key
    JOIN temp.analysis_piece_events we ON we.event_key = p.write_key
), grouped AS (
    SELECT node, receiver_code, leaker_code, kind_code,
           min(slot_start) AS slot_start, max(slot_end) - min(slot_start) AS slot_count,
           min(pos_lo) AS leaker_pos_min, max(pos_hi) AS leaker_pos_max,
           bool_or(source IN ('prefill', 'transfer')) AS prompt_source,
           bool_or(source = 'decode') AS generated_source,
           count(*) FILTER (WHERE NOT known_source) AS by_position,
           min(pos_lo) FILTER (WHERE NOT known_source) AS by_position_lo,
           max(pos_hi) FILTER (WHERE NOT known_source) AS by_position_hi,
           min(read_at) AS first_read_at, max(read_at) AS last_read_at,
           min(write_at) AS first_write_at, max(write_at) AS last_write_at
    FROM piece
    GROUP BY node, run_no, receiver_code, leaker_code, kind_code
), runs AS (
    SELECT g.*, lc.request_id AS leaker_request_id, lr.account_id AS leaker_account_id,
           coalesce(g.prompt_source, false)
               OR (g.by_position > 0
                   AND (lr.prompt_tokens IS NULL OR g.by_position_lo < lr.prompt_tokens))
               AS has_prompt,
           coalesce(g.generated_source, false)
               OR (g.by_position > 0 AND lr.prompt_tokens IS NOT NULL
                   AND g.by_position_hi >= lr.prompt_tokens) AS has_generated
    FROM grouped g
    JOIN work.analysis_request_codes lc ON lc.req_code = g.leaker_code
    LEFT JOIN work.analysis_requests lr ON lr.request_id = lc.request_id
)
SELECT rc.request_id AS receiver_request_id, runs.leaker_request_id, runs.node,
       ($exposure_kinds)[runs.kind_code + 1] AS kind,
       runs.slot_start, runs.slot_count, runs.leaker_pos_min, runs.leaker_pos_max,
       CASE WHEN has_prompt AND has_generated THEN 'mixed'
            WHEN has_generated THEN 'generated' ELSE 'prompt' END AS leaker_part,
       runs.first_read_at, runs.last_read_at, runs.first_write_at, runs.last_write_at,
       rr.account_id AS receiver_account_id, runs.leaker_account_id,
       rr.account_id <> runs.leaker_account_id AS cross_account, 'ledger' AS confidence
FROM runs
JOIN work.analysis_request_codes rc ON rc.req_code = runs.receiver_code
LEFT JOIN work.analysis_requests rr ON rr.request_id = rc.request_id
ORDER BY node, receiver_request_id, leaker_request_id, slot_start, kind;
