-- What ingest recorded of the external ledger's parts' kept rows (queries/ledger/part_facts.sql),
-- each with the index of the partition whose task reads it ($files: the parts' names; $groups:
-- each one's partition), in partition order and, within one, in rank order. Nothing when the
-- case was ingested before ingest recorded them (forensics.analysis.partitions checks the
-- columns first).
WITH part AS (SELECT unnest($files::VARCHAR[]) AS rel, unnest($groups::BIGINT[]) AS partition)
SELECT p.partition, f.node, f.events, f.with_seq, f.slot_end_max, f.key_min, f.key_max, f.reads,
       f.acquisitions, f.first_ts, f.last_ts
FROM ledger_files f JOIN part p USING (rel)
ORDER BY p.partition, f.rank;
