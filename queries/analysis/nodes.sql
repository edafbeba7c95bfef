-- The nodes with ledger events, the largest first (so parallel sweeps finish together), with
-- their event count and whether every event has a seq (then seq orders the node's events).
SELECT node, count(*) AS events, count(seq) = count(*) AS by_seq
FROM kv_events
GROUP BY node
ORDER BY events DESC, node;
