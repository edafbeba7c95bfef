-- The nodes with ledger events (queries/analysis/ledger_nodes.sql), the largest first (so
-- parallel sweeps finish together).
SELECT node, events, by_seq, slot_end_max, key_min, key_max, reads, acquisitions, files
FROM temp.analysis_ledger_nodes
ORDER BY events DESC, node;
