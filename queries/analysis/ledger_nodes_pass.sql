-- The figures of queries/analysis/ledger_nodes.sql per node and ledger file, in one pass over
-- the ledger.
SELECT node, count(*) AS events, count(seq) AS with_seq,
       max(slot_start + slot_count) AS slot_end_max,
       min(input_order) AS key_min, max(input_order) AS key_max,
       count(*) FILTER (WHERE op = 'read') AS reads,
       count(*) FILTER (WHERE op IN ('alloc', 'share')) AS acquisitions,
       min(ts) AS first_ts, max(ts) AS last_ts
FROM kv_events
GROUP BY node, input_order // 1099511627776
