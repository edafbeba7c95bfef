-- exposures: the sweep's exposure runs (temp.analysis_exposure_runs: its foreign pieces
-- coalesced into maximal contiguous slot runs per (receiver, leaker, node, kind), each folded
-- into one row by forensics.analysis.runfacts) joined to their requests. Overlapping pieces (the
-- same slots read again) merge; a new run starts only where a piece begins after every earlier
-- end. kind: the code's name in $exposure_kinds (forensics.analysis.codes).
-- leaker_part: write source prefill/transfer -> prompt, decode -> generated; with another or no
-- source, positions below the leaker's prompt_tokens are prompt (all prompt when it is unknown).
-- A run's pieces all have the run's leaker, so each run keeps, for its pieces of another or no
-- source, their count and their lowest and highest position, and is judged against its
-- leaker's prompt_tokens here: the same as judging every piece.
DELETE FROM exposures;

INSERT INTO exposures BY NAME
WITH runs AS (
    SELECT g.*, lc.request_id AS leaker_request_id, lr.account_id AS leaker_account_id,
           coalesce(g.prompt_source, false)
               OR (g.by_position > 0
                   AND (lr.prompt_tokens IS NULL OR g.by_position_lo < lr.prompt_tokens))
               AS has_prompt,
           coalesce(g.generated_source, false)
               OR (g.by_position > 0 AND lr.prompt_tokens IS NOT NULL
                   AND g.by_position_hi >= lr.prompt_tokens) AS has_generated
    FROM temp.analysis_exposure_runs g
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
-- Request codes are numbered in request id order (queries/analysis/codes.sql), so sorting by
-- them is sorting by the ids, at the cost of integers.
ORDER BY runs.node, runs.receiver_code, runs.leaker_code, runs.slot_start, kind;
