-- Where a node's row from a nodes file and an engine start in its logs disagree; kept in
-- node_disagreements (the nodes file's row is the node's row in `nodes`).
INSERT INTO node_disagreements
WITH file_rows AS (
    SELECT * FROM nodes WHERE src_file NOT IN (SELECT path FROM log_files)
), pairs AS (
    SELECT l.node, f.src_file AS nodes_file, f.src_row AS nodes_row,
           l.src_file AS log_file, l.src_row AS log_line,
           [
               {'field': 'pool_slots', 'in_nodes': CAST(f.pool_slots AS VARCHAR), 'in_log': CAST(l.pool_slots AS VARCHAR)},
               {'field': 'context_len', 'in_nodes': CAST(f.context_len AS VARCHAR), 'in_log': CAST(l.context_len AS VARCHAR)},
               {'field': 'page_size', 'in_nodes': CAST(f.page_size AS VARCHAR), 'in_log': CAST(l.page_size AS VARCHAR)},
               {'field': 'role', 'in_nodes': f.role, 'in_log': l.role},
               {'field': 'engine', 'in_nodes': f.engine, 'in_log': l.engine}
           ] AS fields
    FROM node_starts l JOIN file_rows f ON f.node = l.node
)
SELECT node, c.field, c.in_nodes, c.in_log, nodes_file, nodes_row, log_file, log_line
FROM pairs, UNNEST(fields) AS t(c)
WHERE c.in_nodes IS NOT NULL AND c.in_log IS NOT NULL AND lower(c.in_nodes) <> lower(c.in_log)
ORDER BY node, log_file, log_line, c.field, nodes_file, nodes_row;
