-- Node rows read from logs, one per node and engine start (from the registered logs_nodes_in),
-- into node_starts; then the one `nodes` row of each node that the nodes file does not list:
-- its last engine start (latest started_at, then the last line read).
INSERT INTO node_starts (node, role, model, engine, engine_version, page_size, pool_slots,
                         context_len, started_at, src_file, src_row)
SELECT node, role, model, engine, engine_version, page_size, pool_slots,
       context_len, started_at, src_file, src_row
FROM logs_nodes_in
ORDER BY node, started_at NULLS FIRST, src_file, src_row;

INSERT INTO nodes (node, role, model, engine, engine_version, page_size, pool_slots,
                   context_len, started_at, src_file, src_row)
SELECT node, role, model, engine, engine_version, page_size, pool_slots,
       context_len, started_at, src_file, src_row
FROM node_starts
WHERE node NOT IN (SELECT node FROM nodes)
QUALIFY row_number() OVER (PARTITION BY node
                           ORDER BY started_at DESC NULLS LAST, src_file DESC, src_row DESC) = 1
ORDER BY node;
