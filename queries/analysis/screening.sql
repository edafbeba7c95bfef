-- screening: every request of the gateway log, screened without the ledger (docs/DESIGN.md §4).
-- Reasons:
--   over-pool   status 200 and prompt_tokens > pool_slots of the serving prefill node (its row
--               from the nodes file; else the engine start (node_starts) in effect at received_at,
--               the latest start at or before it, else the earliest);
--   fast-ttft   time to first token below expected / factor, where expected = computed tokens
--               (prompt_tokens less cached_tokens, where the log reports them) /
--               the prefill node's median rate, the median taken over log(prompt_tokens / ttft)
--               of its normal requests (status 200, ttft > 0, prompt_tokens >= min_prompt, not
--               over-pool), and factor = greatest(ttft_factor, exp(mad_k * 1.4826 * MAD)) so a
--               node with widely spread rates needs a larger gap; at least min_normal normal
--               requests per node, else no verdict; and only for a request that computes at
--               least min_prompt tokens itself: the rate is measured on such prompts, and below
--               them fixed costs and the gateway's timing noise, not the prompt, decide its time
--               to first token (under 10 ms of noise on each logged time, ordinary prompts of
--               9 to 147 tokens were measured faster than a tenth of their expected time, some
--               below zero); such a request is not counted as looked at by this signal;
--               nor is one whose stub would not stand out: what a stub's time to first token
--               may be is read from the node's answered requests computing fewer than
--               min_prompt tokens (at least min_normal of them), each time less what computing
--               its prompt took at the node's rate (fixed costs, queueing, batching and the
--               gateway's noise remain), and a request whose flagging time (expected / factor)
--               is not above the 95th percentile of those would let more than one stub in
--               twenty pass unflagged (10 ms of noise on each logged time: 700-token prompts
--               flagged below 3.5 ms, 3 of 5 true stubs unflagged; 1 ms of noise: 2 of 9 true
--               stubs queued for over a second); such a request is still flagged where its
--               time is below its flagging time, but not counted as looked at by this signal
--               (a node with fewer than min_normal timed short prompts gives no such reading:
--               its time model counts as looking, as before);
--   cache-implausible  status 200 and the engine reported more prompt tokens served from its
--               prefix cache (cached_tokens) than a cache can serve: all of the prompt (an
--               engine computes at least its last token), a count that is not whole pages of
--               the prefill node (prefix caches share whole pages where a page holds more than
--               one token), or more than any earlier request on that node held (prompt and
--               output), or all of the prompt but its last token and more than any earlier
--               request of its account on that node was served (where the prompt less one is
--               whole pages the page rule cannot see it; a cache serves that only to a prompt
--               that repeats a cached one but for its last token): the signature of a stub
--               whose uncomputed prompt the engine counts as cached;
--   engine-rejected  the engine logged exceeds-max-tokens / input-too-long for it, yet 200;
--   kv-checksum-mismatch, kv-canary-violation, deferred-release-timeout  engine evidence for it.
-- ledger_covered: the ledger of its decode node spans its received_at, or logs it (from the
-- analysis' pass over the ledger: queries/analysis/ledger_nodes.sql and codes.sql), and no
-- known hole of that ledger (ledger_holes, widened by a second for the clocks) starts before
-- it ended (completed_at, or its first token, or received_at): not only the reads a hole meets
-- are lost, but also writes, and a write lost before a request's reads may be what it read,
-- attributed by the ledger to an earlier writer or to none. coverage
-- says which: ledger, ledger-hole, outside-ledger (the node has a ledger that does not reach
-- the request) or no-ledger. signals: the stub signals that could be looked for at all for the
-- request (over-pool: its prefill node's pool is known; fast-ttft: that node has enough normal
-- requests and a stub of the request would stand out from its short prompts' times;
-- cache-implausible: the log reports its cached tokens and its prefill node's engine (nodes, or
-- its start-up log) is vLLM, which counts a stub as cached; engine-log: that node's engine log
-- was read; token-counters, added by analysis/token_shortfall.sql: its prefill node's prefill
-- batch counters were compared), so that what could not be looked for is said,
-- over the requests that may have decoded (answered: a first token logged, or status 200 with
-- completion tokens billed or not logged, so that a log without first-token times is not
-- taken to have nothing to look at).
-- token-shortfall is added by analysis/token_shortfall.sql, which needs the other reasons.
DELETE FROM screening;

INSERT INTO screening BY NAME
WITH pool AS (
    SELECT n.node, n.pool_slots, n.started_at, n.src_file, n.src_row, false AS from_log
    FROM nodes n
    WHERE n.pool_slots IS NOT NULL AND n.src_file NOT IN (SELECT path FROM log_files)
    UNION ALL
    SELECT s.node, s.pool_slots, s.started_at, s.src_file, s.src_row, true AS from_log
    FROM node_starts s WHERE s.pool_slots IS NOT NULL
), pages AS (
    SELECT n.node, n.page_size, n.started_at, n.src_file, n.src_row,
           n.src_file IN (SELECT path FROM log_files) AS from_log
    FROM nodes n WHERE n.page_size IS NOT NULL
    UNION ALL
    SELECT s.node, s.page_size, s.started_at, s.src_file, s.src_row, true
    FROM node_starts s WHERE s.page_size IS NOT NULL
), r0 AS (
    SELECT q.*,
           (SELECT p.pool_slots FROM pool p
            WHERE p.node = q.serving_prefill_node
            ORDER BY p.from_log, coalesce(p.started_at <= q.received_at, true) DESC,
                     p.started_at DESC NULLS LAST, p.src_file, p.src_row
            LIMIT 1) AS pool_slots,
           (SELECT g.page_size FROM pages g
            WHERE g.node = q.serving_prefill_node
            ORDER BY g.from_log, coalesce(g.started_at <= q.received_at, true) DESC,
                     g.started_at DESC NULLS LAST, g.src_file, g.src_row
            LIMIT 1) AS page_size,
           max(q.prompt_tokens + coalesce(q.completion_tokens, 0)) OVER (
               PARTITION BY q.serving_prefill_node ORDER BY q.received_at, q.request_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS held_before,
           max(q.cached_tokens) OVER (
               PARTITION BY q.serving_prefill_node, q.account_id
               ORDER BY q.received_at, q.request_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS account_hit_before,
           (epoch_us(q.first_token_at) - epoch_us(q.received_at)) / 1000.0 AS ttft_ms
    FROM work.analysis_requests q
), r AS (
    SELECT *, http_status = 200 AND prompt_tokens > pool_slots AS over_pool,
           http_status = 200 AND coalesce(cached_tokens, 0) > 0
           AND (cached_tokens >= prompt_tokens
                OR (page_size > 1 AND cached_tokens % page_size <> 0)
                OR cached_tokens > coalesce(held_before, 0)
                OR (cached_tokens = prompt_tokens - 1
                    AND cached_tokens > coalesce(account_hit_before, 0))) AS cache_implausible,
           greatest(prompt_tokens - coalesce(cached_tokens, 0), 1) AS computed_tokens
    FROM r0
), normal AS (
    SELECT serving_prefill_node AS node, ln(computed_tokens / (ttft_ms / 1000.0)) AS log_rate
    FROM r
    WHERE http_status = 200 AND ttft_ms > 0 AND computed_tokens >= $min_prompt
      AND NOT coalesce(over_pool, false) AND NOT coalesce(cache_implausible, false)
      AND serving_prefill_node IS NOT NULL
), med AS (
    SELECT node, count(*) AS n, median(log_rate) AS med FROM normal GROUP BY node
), model AS (
    SELECT med.node, med.n, med.med,
           greatest($ttft_factor, exp($mad_k * 1.4826 * median(abs(normal.log_rate - med.med))))
               AS factor
    FROM med JOIN normal USING (node) GROUP BY med.node, med.n, med.med
), stub_time AS (
    -- what a stub's time to first token may be on the node: its short prompts' times less
    -- what computing their prompt took at the node's rate (fixed costs, queueing, batching and
    -- the gateway's noise remain), the 95th percentile; and how far below them noise alone
    -- may take a time: the 1st percentile less the spread from it to the median again
    SELECT m.node, quantile_cont(r.ttft_ms - (r.computed_tokens - 1) / exp(m.med) * 1000.0,
                                 0.95) AS floor_ms,
           2 * quantile_cont(r.ttft_ms - (r.computed_tokens - 1) / exp(m.med) * 1000.0, 0.01)
           - quantile_cont(r.ttft_ms - (r.computed_tokens - 1) / exp(m.med) * 1000.0, 0.5)
               AS low_ms
    FROM r JOIN model m ON m.node = r.serving_prefill_node
    WHERE r.http_status = 200 AND r.ttft_ms IS NOT NULL AND r.computed_tokens < $min_prompt
      AND NOT coalesce(r.over_pool, false) AND NOT coalesce(r.cache_implausible, false)
    GROUP BY m.node HAVING count(*) >= $min_normal
), timed AS (
    SELECT r.*, r.computed_tokens / exp(m.med) * 1000.0 AS expected_ttft_ms,
           coalesce(m.n >= $min_normal, false) AND r.computed_tokens >= $min_prompt AS modelled,
           r.ttft_ms < r.computed_tokens / exp(m.med) * 1000.0 / m.factor AS fast,
           coalesce(r.computed_tokens / exp(m.med) * 1000.0 / m.factor > f.floor_ms, true)
               AS stands_out,
           r.ttft_ms - (r.computed_tokens - 1) / exp(m.med) * 1000.0 < f.low_ms AS below_noise
    FROM r LEFT JOIN model m ON m.node = r.serving_prefill_node
    LEFT JOIN stub_time f ON f.node = r.serving_prefill_node
), judged AS (
    -- fast-ttft: faster than its prompt allows; where the node's times are too noisy for a
    -- stub to stand out, only if faster than the noise leaves any of its short prompts too
    -- (else the gateway's noise alone flags it; such requests are counted as not looked at)
    SELECT t.* EXCLUDE (modelled, fast, stands_out, below_noise),
           t.modelled AND t.fast AND (t.stands_out OR coalesce(t.below_noise, false))
               AS fast_ttft,
           t.modelled AND t.ttft_ms IS NOT NULL AND t.stands_out AS ttft_judged
    FROM timed t
), evidence AS (
    SELECT e.request_id,
           list(DISTINCT CASE WHEN e.kind IN ('exceeds-max-tokens', 'input-too-long')
                              THEN 'engine-rejected' ELSE e.kind END) AS kinds
    FROM engine_evidence e WHERE e.request_id IS NOT NULL GROUP BY e.request_id
), span AS (
    SELECT node, first_ts, last_ts FROM temp.analysis_ledger_nodes
), logged AS (
    SELECT request_id, node FROM temp.analysis_request_nodes
), cached_stub_nodes AS (
    -- nodes whose engine counts a stub's uncomputed prompt as cached: vLLM takes a prompt it
    -- did not compute as computed only through its prefix-cache lookup, and reports the lookup's
    -- count as the response's cached tokens; SGLang's stub is a prompt cut to one token, which
    -- its cache serves no more of than any other (its cached tokens cannot show it)
    SELECT node FROM (SELECT node, engine FROM nodes UNION ALL SELECT node, engine FROM node_starts)
    WHERE engine IS NOT NULL
    GROUP BY node HAVING bool_and(lower(engine) LIKE '%vllm%')
), placed AS (
    SELECT j.*, ev.kinds, s.node AS ledger_node,
           (s.node IS NOT NULL AND j.received_at BETWEEN s.first_ts AND s.last_ts)
               OR l.request_id IS NOT NULL AS in_ledger,
           EXISTS (SELECT 1 FROM ledger_holes h
                   WHERE h.node = j.serving_decode_node
                     AND (h.first_ts IS NULL OR h.first_ts <= coalesce(
                              j.completed_at, j.first_token_at, j.received_at) + INTERVAL 1 SECOND))
               AS in_hole
    FROM judged j
    LEFT JOIN evidence ev ON ev.request_id = j.request_id
    LEFT JOIN span s ON s.node = j.serving_decode_node
    LEFT JOIN logged l ON l.request_id = j.request_id AND l.node = j.serving_decode_node
)
SELECT j.request_id, j.account_id, j.serving_prefill_node AS prefill_node,
       j.serving_decode_node AS decode_node,
       list_sort(list_distinct(list_concat(
           [CASE WHEN coalesce(j.over_pool, false) THEN 'over-pool' END,
            CASE WHEN coalesce(j.fast_ttft, false) THEN 'fast-ttft' END,
            CASE WHEN coalesce(j.cache_implausible, false) THEN 'cache-implausible' END],
           list_filter(coalesce(j.kinds, []),
                       lambda k: k <> 'engine-rejected' OR j.http_status = 200)
       ))) AS reasons,
       j.ttft_ms, j.expected_ttft_ms,
       j.in_ledger AND NOT j.in_hole AS ledger_covered,
       CASE WHEN j.ledger_node IS NULL AND NOT j.in_ledger THEN 'no-ledger'
            WHEN j.in_hole THEN 'ledger-hole'
            WHEN NOT j.in_ledger THEN 'outside-ledger'
            ELSE 'ledger' END AS coverage,
       list_filter(
           [CASE WHEN j.pool_slots IS NOT NULL THEN 'over-pool' END,
            CASE WHEN j.ttft_judged THEN 'fast-ttft' END,
            CASE WHEN j.cached_tokens IS NOT NULL
                      AND j.serving_prefill_node IN (SELECT node FROM cached_stub_nodes)
                 THEN 'cache-implausible' END,
            CASE WHEN j.serving_prefill_node IN (SELECT node FROM node_starts)
                 THEN 'engine-log' END],
           lambda x: x IS NOT NULL) AS signals,
       j.first_token_at IS NOT NULL
       OR j.http_status = 200 AND coalesce(j.completion_tokens, 1) > 0 AS answered
FROM placed j
ORDER BY j.request_id;
