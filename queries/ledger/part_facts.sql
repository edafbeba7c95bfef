-- What the checked part's kept rows (the groups of queries/ledger/check_part.sql whose q is
-- NULL) are, as the analysis' pass over a node would find them
-- (queries/analysis/ledger_nodes.sql): their count, how many carry seq, the highest slot end,
-- the smallest and largest event key (input_order), the reads and allocations (alloc or share)
-- and the span of their times. Recorded in ledger_files; $file: the part's name there.
SELECT $file AS rel, CAST(coalesce(sum(events), 0) AS BIGINT) AS events,
       CAST(coalesce(sum(with_seq), 0) AS BIGINT) AS with_seq,
       CAST(max(slot_end_max) AS BIGINT) AS slot_end_max,
       CAST(min(key_min) AS BIGINT) AS key_min, CAST(max(key_max) AS BIGINT) AS key_max,
       CAST(coalesce(sum(reads), 0) AS BIGINT) AS reads,
       CAST(coalesce(sum(acquisitions), 0) AS BIGINT) AS acquisitions,
       min(first_ts) AS first_ts, max(last_ts) AS last_ts
FROM checked
WHERE q IS NULL;
