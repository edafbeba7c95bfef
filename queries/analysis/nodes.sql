-- The nodes with ledger events, the largest first (so parallel sweeps finish together), with
-- their event count, whether every event has a seq (then seq orders the node's events), the
-- highest slot end (so the sweep holds slots as int32 where they fit), the smallest and largest
-- event key (so it holds keys as int32 offsets where they fit, or none where they are dense),
-- and the reads and allocations (alloc or share), which size the sweep's buffers.
SELECT node, count(*) AS events, count(seq) = count(*) AS by_seq,
       coalesce(max(slot_start + slot_count), 0) AS slot_end_max,
       min(input_order) AS key_min, max(input_order) AS key_max,
       count(*) FILTER (WHERE op = 'read') AS reads,
       count(*) FILTER (WHERE op IN ('alloc', 'share')) AS acquisitions
FROM kv_events
GROUP BY node
ORDER BY events DESC, node;
