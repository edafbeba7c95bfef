-- What ingest recorded of a partition's parts' kept rows (queries/ledger/part_facts.sql), for
-- its analysis task; $files: the parts' names. Nothing when the case was ingested before ingest
-- recorded them (forensics.analysis.partitions checks the columns first).
SELECT node, events, with_seq, slot_end_max, key_min, key_max, reads, acquisitions, first_ts,
       last_ts
FROM ledger_files
WHERE rel IN (SELECT unnest($files::VARCHAR[]))
ORDER BY rank;
