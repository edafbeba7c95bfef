-- The disagreements found by the last load of logs, for the load summary.
SELECT node, field, in_nodes, in_log, nodes_file, nodes_row, log_file, log_line
FROM node_disagreements
ORDER BY node, log_file, log_line, field, nodes_file, nodes_row;
