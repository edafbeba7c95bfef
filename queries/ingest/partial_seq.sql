-- A node whose events carry seq on some rows only: its events are then ordered by ts, not seq
-- (seq decides only when every event of the node has it). One warning per node.
INSERT INTO ingest_warnings
SELECT 'kv_events', min(src_file), NULL, 'seq', node,
       kvf_partial_seq_reason(node, count(seq), count(*))
FROM kv_events
GROUP BY node
HAVING count(seq) > 0 AND count(seq) < count(*)
ORDER BY node;
