-- The figures of queries/analysis/ledger_nodes.sql per node and part, as ingest recorded them
-- for a partition task's parts (registered as _part_facts; queries/ledger/part_facts.sql). The
-- parts' digests are checked against ingest's record as the task reads them, so these are the
-- facts of the parts it reads.
SELECT node, events, with_seq, slot_end_max, key_min, key_max, reads, acquisitions, first_ts,
       last_ts
FROM _part_facts
