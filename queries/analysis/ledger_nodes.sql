-- One row per node with ledger events, made by the analysis' first pass over the ledger (the
-- one that lists the nodes to sweep) so that later steps need not scan the ledger again: the
-- event count, whether every event has a seq (then seq orders the node's events), the highest
-- slot end (so the sweep holds slots as int32 where they fit), the span of the node's events
-- (screening: which requests the ledger covers) and its reads (the summary).
-- A temporary table: made anew by each analysis, gone with the connection.
CREATE OR REPLACE TEMP TABLE analysis_ledger_nodes AS
SELECT node, count(*) AS events, count(seq) = count(*) AS by_seq,
       coalesce(max(slot_start + slot_count), 0) AS slot_end_max,
       min(ts) AS first_ts, max(ts) AS last_ts,
       count(*) FILTER (WHERE op = 'read') AS reads
FROM kv_events
GROUP BY node;
