-- Per node: its facts from start-up, the requests it served and the exposures read on it.
WITH served AS (
    SELECT n AS node, count(DISTINCT request_id) AS requests,
           max(prompt_tokens) AS max_prompt_tokens
    FROM (SELECT request_id, prompt_tokens, unnest([prefill_node, decode_node, node]) AS n
          FROM requests)
    WHERE n IS NOT NULL
    GROUP BY n
),
exposed AS (
    SELECT node, count(DISTINCT receiver_request_id) AS receivers,
           sum(tokens) FILTER (WHERE cross_account) AS cross_tokens,
           sum(tokens) FILTER (WHERE NOT cross_account) AS same_tokens
    FROM report_exposure_pairs GROUP BY node
),
facts AS (
    SELECT node, arg_min(role, (src_file, src_row)) AS role,
           arg_min(engine, (src_file, src_row)) AS engine,
           arg_min(engine_version, (src_file, src_row)) AS engine_version,
           arg_min(pool_slots, (src_file, src_row)) AS pool_slots,
           arg_min(context_len, (src_file, src_row)) AS context_len,
           min(started_at) AS started_at
    FROM nodes GROUP BY node
),
names AS (
    SELECT node FROM facts UNION SELECT node FROM served UNION SELECT node FROM exposed
)
SELECT n.node, f.role, f.engine, f.engine_version, f.pool_slots, f.context_len, f.started_at,
       coalesce(s.requests, 0) AS requests, s.max_prompt_tokens,
       coalesce(e.receivers, 0) AS receivers, coalesce(e.cross_tokens, 0) AS cross_tokens,
       coalesce(e.same_tokens, 0) AS same_tokens,
       f.pool_slots < f.context_len AS pool_short
FROM names n
LEFT JOIN facts f USING (node)
LEFT JOIN served s USING (node)
LEFT JOIN exposed e USING (node)
ORDER BY n.node;
