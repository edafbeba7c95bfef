-- The warning for a partition (one node) whose kept events carry seq on some rows only, as
-- queries/ingest/partial_seq.sql writes it for a loaded ledger; no row when all or none do.
-- $file: the partition's first part; $with_seq and $total: its kept rows with seq, and in all.
SELECT 'kv_events' AS table_name, $file AS file, NULL::BIGINT AS "row", 'seq' AS "column",
       $node AS "value", kvf_partial_seq_reason($node, $with_seq, $total) AS reason
WHERE $with_seq > 0 AND $with_seq < $total;
