-- The nodes with ledger events, the largest first (so parallel sweeps finish together), with
-- their event count, whether every event has a seq (then seq orders the node's events), and
-- the highest slot end (so the sweep holds slots as int32 where they fit).
SELECT node, count(*) AS events, count(seq) = count(*) AS by_seq,
       coalesce(max(slot_start + slot_count), 0) AS slot_end_max
FROM kv_events
GROUP BY node
ORDER BY events DESC, node;
