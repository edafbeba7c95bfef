INSERT INTO node_facts (node, fact, value, src_file, src_line, run, source)
SELECT node, fact, value, src_file, src_line, run, source
FROM logs_facts_in
ORDER BY node, run, fact;
