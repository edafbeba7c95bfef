-- What each checked part's kept rows (the groups of queries/ledger/check_part.sql whose q is
-- NULL) are, as the analysis' pass over a node would find them
-- (queries/analysis/ledger_nodes.sql): their count, how many carry seq, the highest slot end,
-- the smallest and largest event key (input_order), the reads and allocations (alloc or share)
-- and the span of their times. Recorded in ledger_files. One row per part of _parts (rank,
-- rel: its name there), in rank order, a part without kept rows too.
SELECT p.rel, CAST(coalesce(sum(c.events), 0) AS BIGINT) AS events,
       CAST(coalesce(sum(c.with_seq), 0) AS BIGINT) AS with_seq,
       CAST(max(c.slot_end_max) AS BIGINT) AS slot_end_max,
       CAST(min(c.key_min) AS BIGINT) AS key_min, CAST(max(c.key_max) AS BIGINT) AS key_max,
       CAST(coalesce(sum(c.reads), 0) AS BIGINT) AS reads,
       CAST(coalesce(sum(c.acquisitions), 0) AS BIGINT) AS acquisitions,
       min(c.first_ts) AS first_ts, max(c.last_ts) AS last_ts
FROM _parts p LEFT JOIN checked c ON c.part_rank = p.rank AND c.q IS NULL
GROUP BY p.rank, p.rel
ORDER BY p.rank;
