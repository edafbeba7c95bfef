-- The nodes with ledger events, the largest first (so parallel sweeps finish together), with
-- their event count, whether every event has a seq (then seq orders the node's events), the
-- highest slot end (so the sweep holds slots as int32 where they fit), the smallest and largest
-- event key, the reads and allocations (alloc or share), which size the sweep's buffers, and the
-- node's keys in each ledger file ([smallest, largest] per file, in key order: input_order is
-- the file's rank * 2^40 + its row, queries/ingest/validate_kv_events.sql), so that a node
-- whose keys are every row of its files is put in order by key.
WITH per_file AS (
    SELECT node, count(*) AS events, count(seq) AS with_seq,
           max(slot_start + slot_count) AS slot_end_max,
           min(input_order) AS key_min, max(input_order) AS key_max,
           count(*) FILTER (WHERE op = 'read') AS reads,
           count(*) FILTER (WHERE op IN ('alloc', 'share')) AS acquisitions
    FROM kv_events
    GROUP BY node, input_order // 1099511627776
)
SELECT node, sum(events) AS events, sum(with_seq) = sum(events) AS by_seq,
       coalesce(max(slot_end_max), 0) AS slot_end_max,
       min(key_min) AS key_min, max(key_max) AS key_max,
       sum(reads) AS reads, sum(acquisitions) AS acquisitions,
       list([key_min, key_max] ORDER BY key_min) AS files
FROM per_file
GROUP BY node
ORDER BY events DESC, node;
