-- How far out of a decode node's own order the gateway's times put its allocations and frees,
-- from a case with both the gateway's log and the node's KV ledger: reconstruction takes a
-- request's allocation at its logged arrival and its free at its logged completion, and
-- explores both orders of operations closer than --skew-ms. Per operation, the node's time
-- (its request's first alloc, its last free there) and the gateway's; an operation logged
-- before one the node did earlier is out of order by their logged gap. needed_us is the widest
-- such gap: a --skew-ms above it groups every pair the gateway's times put out of order.
WITH ops AS (
    SELECT
        k.node,
        k.request_id,
        epoch_us(min(k.ts) FILTER (WHERE k.op = 'alloc')) AS alloc_us,
        epoch_us(max(k.ts) FILTER (WHERE k.op = 'free')) AS free_us
    FROM kv_events AS k
    JOIN requests AS r ON r.request_id = k.request_id AND r.decode_node = k.node
    GROUP BY ALL
),
timed AS (
    SELECT o.node, o.request_id, o.alloc_us AS engine_us, epoch_us(r.received_at) AS logged_us
    FROM ops AS o JOIN requests AS r USING (request_id)
    WHERE o.alloc_us IS NOT NULL
    UNION ALL
    SELECT o.node, o.request_id, o.free_us, epoch_us(r.completed_at)
    FROM ops AS o JOIN requests AS r USING (request_id)
    WHERE o.free_us IS NOT NULL AND r.completed_at IS NOT NULL
),
behind AS (
    SELECT
        node,
        request_id,
        max(logged_us) OVER (
            PARTITION BY node ORDER BY engine_us
            RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) - logged_us AS behind_us
    FROM timed
)
SELECT
    node,
    count(DISTINCT request_id) AS requests,
    count(*) AS operations,
    greatest(coalesce(max(behind_us), 0), 0) AS needed_us,
    count(*) FILTER (WHERE behind_us > 0) AS out_of_order
FROM behind
GROUP BY node
ORDER BY node
