-- token-shortfall: the engine's own prompt-token counters against what the gateway billed
-- (docs/guides/without-a-ledger.md). A stub computes one token of a prompt billed at P: the
-- counters of its prefill node fall short of the billed tokens. Only SGLang's prefill batch
-- lines are used (engine_counters kind sglang.prefill-batch, with a dated time): their counts
-- are the batch's own and exact. vLLM's stats line counts the tokens the scheduler computed,
-- and a stub's uncomputed prompt is taken as prefix-cache hits there, so it cannot show a
-- shortfall (docs/engines.md).
--
-- Matching by time: a request's prefill batch lines are logged after it arrived and before its
-- first token, so they lie in [received_at - 2 s, first_token_at + 1 s] (a second for the
-- line's time being cut to the second, a second for the clocks). Per node, the batch lines are
-- numbered in time order; each compared request spans the lines in that interval (none: the
-- two lines around it, where its tokens should have been). Overlapping spans are merged, so
-- a window is a run of lines that no request's span crosses the edge of: every compared
-- request's tokens are in exactly one window, whatever line they were in. Compared: answered
-- with a first token, and its interval inside the node's first and last batch line (at the
-- edges of a log its lines may be missing). A request the gateway does not list (a warm-up)
-- only adds engine tokens: a surplus, never a shortfall.
--
-- basis computed (every compared request of the window has cached_tokens): the engine's new
-- tokens against the billed prompt less cached tokens; basis total: new plus cached tokens
-- against the billed prompts. A request flagged as a stub by another reason ($stub_reasons) is
-- counted as computing 1 token. A retraction prefills again (a surplus). SGLang's counts are
-- exact: any shortfall (above 0 tokens) that the flagged stubs do not explain makes every other
-- compared request of the window a possible receiver (token-shortfall): a precision cost, the
-- stub being one of them. Every compared request gets the signal token-counters.
DELETE FROM counter_windows;
DELETE FROM counter_window_requests;

-- The batch lines, numbered per node in time order.
CREATE OR REPLACE TEMP TABLE analysis_counter_lines AS
SELECT node, ts, new_tokens, cached_tokens,
       row_number() OVER (PARTITION BY node ORDER BY ts, src_file, src_line) AS i
FROM engine_counters
WHERE kind = 'sglang.prefill-batch' AND ts IS NOT NULL;

CREATE OR REPLACE TEMP TABLE analysis_counter_requests AS
WITH bounds AS (
    SELECT node, min(ts) AS first_ts, max(ts) AS last_ts
    FROM temp.analysis_counter_lines GROUP BY node
), reqs AS (
    SELECT q.request_id, q.serving_prefill_node AS node, q.prompt_tokens, q.cached_tokens,
           list_has_any(s.reasons, $stub_reasons) AS flagged,
           q.received_at - INTERVAL 2 SECOND AS lo_ts,
           q.first_token_at + INTERVAL 1 SECOND AS hi_ts
    FROM work.analysis_requests q
    JOIN screening s USING (request_id)
    JOIN bounds b ON b.node = q.serving_prefill_node
    WHERE q.first_token_at IS NOT NULL
      AND q.received_at - INTERVAL 2 SECOND >= b.first_ts
      AND q.first_token_at + INTERVAL 1 SECOND <= b.last_ts
), lines_at AS (
    SELECT node, ts, min(i) AS first_i, max(i) AS last_i
    FROM temp.analysis_counter_lines GROUP BY node, ts
), spans AS (
    SELECT r.*, a.first_i AS after_lo, b.last_i AS before_hi
    FROM reqs r
    ASOF JOIN lines_at a ON a.node = r.node AND a.ts >= r.lo_ts
    ASOF JOIN lines_at b ON b.node = r.node AND r.hi_ts >= b.ts
), ordered AS (
    SELECT *, least(after_lo, before_hi) AS lo_i, greatest(after_lo, before_hi) AS hi_i
    FROM spans
), reach AS (
    SELECT *, max(hi_i) OVER (PARTITION BY node ORDER BY lo_i, hi_i, request_id
                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reached
    FROM ordered
)
SELECT *, sum(CASE WHEN lo_i > coalesce(reached, 0) THEN 1 ELSE 0 END)
              OVER (PARTITION BY node ORDER BY lo_i, hi_i, request_id) AS window_no
FROM reach;

INSERT INTO counter_windows BY NAME
WITH windows AS (
    SELECT node, window_no, min(lo_i) AS lo_i, max(hi_i) AS hi_i, count(*) AS requests,
           count(*) FILTER (WHERE flagged) AS flagged_stubs,
           bool_and(cached_tokens IS NOT NULL) AS computed_basis,
           sum(CASE WHEN flagged THEN 1 ELSE prompt_tokens - coalesce(cached_tokens, 0) END)
               AS billed_computed,
           sum(CASE WHEN flagged THEN 1 ELSE prompt_tokens END) AS billed_total
    FROM temp.analysis_counter_requests GROUP BY node, window_no
), counted AS (
    SELECT w.node, w.window_no, min(l.ts) AS first_ts, max(l.ts) AS last_ts,
           count(*) AS batch_lines, sum(l.new_tokens) AS new_tokens,
           sum(l.new_tokens + l.cached_tokens) AS all_tokens
    FROM windows w
    JOIN temp.analysis_counter_lines l ON l.node = w.node AND l.i BETWEEN w.lo_i AND w.hi_i
    GROUP BY w.node, w.window_no
)
SELECT w.node, w.window_no, c.first_ts, c.last_ts, c.batch_lines, w.requests, w.flagged_stubs,
       CASE WHEN w.computed_basis THEN 'computed' ELSE 'total' END AS basis,
       CASE WHEN w.computed_basis THEN c.new_tokens ELSE c.all_tokens END AS engine_tokens,
       CASE WHEN w.computed_basis THEN w.billed_computed ELSE w.billed_total END
           AS billed_tokens,
       CASE WHEN w.computed_basis THEN w.billed_computed - c.new_tokens
            ELSE w.billed_total - c.all_tokens END AS shortfall
FROM windows w JOIN counted c USING (node, window_no)
ORDER BY w.node, w.window_no;

INSERT INTO counter_window_requests BY NAME
SELECT request_id, node, window_no FROM temp.analysis_counter_requests
ORDER BY node, window_no, request_id;

UPDATE screening s
SET reasons = list_sort(list_distinct(list_concat(
        s.reasons,
        CASE WHEN w.shortfall > 0 AND NOT r.flagged THEN ['token-shortfall']
             ELSE []::VARCHAR[] END))),
    signals = list_concat(coalesce(s.signals, []), ['token-counters'])
FROM temp.analysis_counter_requests r
JOIN counter_windows w USING (node, window_no)
WHERE s.request_id = r.request_id;
