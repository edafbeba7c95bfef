-- One row per node with ledger events, so that no later step scans the ledger again. Per node:
-- its event count; whether every event has a seq (then seq orders the node's events); the
-- highest slot end (so the sweep holds slots as int32 where they fit); the smallest and largest
-- event key; the reads and allocations (alloc or share), which size the sweep's buffers; the
-- node's keys in each ledger file ([smallest, largest] per file, in key order: input_order is
-- the file's rank * 2^40 + its row, queries/ingest/validate_kv_events.sql), so that a node
-- whose keys are every row of its files is put in order by key; and the span of its events
-- (screening: which requests the ledger covers).
-- {per_file}: the same figures per node and ledger file, from the analysis' one pass over the
-- ledger (queries/analysis/ledger_nodes_pass.sql, the pass that lists the nodes to sweep), or
-- from what ingest recorded of an external ledger's parts (queries/ledger/part_facts.sql).
-- A temporary table: made anew by each analysis, gone with the connection.
CREATE OR REPLACE TEMP TABLE analysis_ledger_nodes AS
WITH per_file AS ({per_file})
SELECT node, CAST(sum(events) AS BIGINT) AS events, sum(with_seq) = sum(events) AS by_seq,
       coalesce(max(slot_end_max), 0) AS slot_end_max,
       min(key_min) AS key_min, max(key_max) AS key_max,
       CAST(sum(reads) AS BIGINT) AS reads, CAST(sum(acquisitions) AS BIGINT) AS acquisitions,
       list([key_min, key_max] ORDER BY key_min) AS files,
       min(first_ts) AS first_ts, max(last_ts) AS last_ts
FROM per_file
WHERE events > 0
GROUP BY node;
