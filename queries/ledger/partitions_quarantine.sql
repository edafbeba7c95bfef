-- The quarantined rows of the external ledger's parts, each with the index of the partition
-- whose task reads it ($files: the parts' names as recorded; $groups: each one's partition), in
-- partition order: one pass for every task (forensics.analysis.partitions), instead of one per
-- partition over the whole quarantine.
WITH part AS (SELECT unnest($files::VARCHAR[]) AS file, unnest($groups::BIGINT[]) AS partition)
SELECT p.partition, q.*
FROM quarantine q JOIN part p USING (file)
WHERE q.table_name = 'kv_events'
ORDER BY p.partition, q.rowid;
