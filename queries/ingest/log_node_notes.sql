-- The warnings that say an engine log was read as another node's than its name says
-- (queries/ingest/pair_log_node.sql), for the run summary.
SELECT reason FROM ingest_warnings WHERE table_name = 'logs' AND "column" = 'node'
ORDER BY file;
