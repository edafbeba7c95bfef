-- Nodes without a KV ledger that serve requests, with their engine, page size and pool: the
-- nodes file's row first, else the engine log's start-up row (the latest start). Role from the
-- nodes table, else from how the request log uses the node.
WITH served AS (
    SELECT serving_prefill_node AS node, 'prefill' AS used FROM work.analysis_requests
    WHERE prefill_node IS NOT NULL
    UNION
    SELECT serving_decode_node, 'decode' FROM work.analysis_requests WHERE decode_node IS NOT NULL
    UNION
    SELECT node, 'unified' FROM work.analysis_requests WHERE node IS NOT NULL
), ledger AS (
    SELECT DISTINCT node FROM kv_events
), facts AS (
    SELECT n.*, n.src_file NOT IN (SELECT path FROM input_files WHERE table_name = 'nodes')
               AS from_log
    FROM nodes n
), best AS (
    SELECT node,
           arg_min(role, (from_log, -epoch_us(coalesce(started_at, TIMESTAMP '1970-01-01')),
                          src_file, src_row)) FILTER (WHERE role IS NOT NULL) AS role,
           arg_min(engine, (from_log, src_file, src_row))
               FILTER (WHERE engine IS NOT NULL) AS engine,
           arg_min(engine_version, (from_log, src_file, src_row))
               FILTER (WHERE engine_version IS NOT NULL) AS engine_version,
           arg_min(page_size, (from_log, src_file, src_row))
               FILTER (WHERE page_size IS NOT NULL) AS page_size,
           arg_min(pool_slots, (from_log, -epoch_us(coalesce(started_at, TIMESTAMP '1970-01-01')),
                                src_file, src_row))
               FILTER (WHERE pool_slots IS NOT NULL) AS pool_slots
    FROM facts GROUP BY node
)
SELECT s.node, coalesce(b.role, min(s.used)) AS role, b.engine, b.engine_version,
       b.page_size, b.pool_slots
FROM served s LEFT JOIN best b USING (node)
WHERE s.node NOT IN (SELECT node FROM ledger)
GROUP BY s.node, b.role, b.engine, b.engine_version, b.page_size, b.pool_slots
ORDER BY s.node;
