-- How late each node's outputs reached the gateway, from a case with both a KV ledger and the
-- gateway's times: per output (a request's first token, its completion), the gateway's time
-- and the time of the engine step that made it (the step of the request's last prefill write,
-- and of its last write: a request writes once in every step it runs). Two outputs of one step
-- logged apart, or an output logged after one of a later step, show the delivery jitter: the
-- widest gap from an output to the latest one logged of its step or an earlier one. Only
-- requests served on one node (a unified node's) are measured: a disaggregated request's
-- first token and completion come from two nodes' clocks.
WITH made AS (
    SELECT
        any_value(node) AS node,
        request_id,
        max(ts) FILTER (WHERE source = 'prefill') AS first_step,
        max(ts) AS last_step
    FROM kv_events
    WHERE op = 'write'
    GROUP BY request_id
    HAVING count(DISTINCT node) = 1
),
outputs AS (
    SELECT m.node, m.request_id, epoch_us(r.first_token_at) AS logged_us,
           epoch_us(m.first_step) AS step_us
    FROM made AS m JOIN requests AS r USING (request_id)
    WHERE m.first_step IS NOT NULL AND r.first_token_at IS NOT NULL
    UNION ALL
    SELECT m.node, m.request_id, epoch_us(r.completed_at), epoch_us(m.last_step)
    FROM made AS m JOIN requests AS r USING (request_id)
    WHERE m.first_step IS NOT NULL AND r.completed_at IS NOT NULL
),
latest AS (
    SELECT
        node,
        request_id,
        step_us,
        logged_us - step_us AS delay_us,
        max(logged_us) OVER (
            PARTITION BY node ORDER BY step_us
            RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) - logged_us AS behind_us
    FROM outputs
)
SELECT
    node,
    count(DISTINCT request_id) AS requests,
    count(*) AS outputs,
    count(DISTINCT step_us) AS steps,
    max(behind_us) AS needed_us,
    min(delay_us) AS delay_min_us,
    quantile_disc(delay_us, 0.5) AS delay_median_us,
    quantile_disc(delay_us, 0.99) AS delay_p99_us,
    max(delay_us) AS delay_max_us
FROM latest
GROUP BY node
ORDER BY node
