-- A node whose events carry seq on some rows only: its events are then ordered by ts, not seq
-- (seq decides only when every event of the node has it). One warning per node.
INSERT INTO ingest_warnings
SELECT 'kv_events', min(src_file), NULL, 'seq', node,
       'node ' || node || ': ' || count(seq) || ' event(s) carry seq and '
       || (count(*) - count(seq)) || ' do not, so its events are ordered by ts, not seq'
FROM kv_events
GROUP BY node
HAVING count(seq) > 0 AND count(seq) < count(*)
ORDER BY node;
