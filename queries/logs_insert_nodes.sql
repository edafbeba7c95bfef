-- Node rows read from logs, one per node and engine start (from the registered logs_nodes_in).
INSERT INTO nodes (node, role, model, engine, engine_version, page_size, pool_slots,
                   context_len, started_at, src_file, src_row)
SELECT node, role, model, engine, engine_version, page_size, pool_slots,
       context_len, started_at, src_file, src_row
FROM logs_nodes_in
ORDER BY node, started_at NULLS FIRST, src_file, src_row;
