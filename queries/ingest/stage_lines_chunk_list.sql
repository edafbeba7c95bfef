-- The chunks of queries/ingest/stage_lines_chunks.sql, in order.
SELECT DISTINCT chunk FROM line_chunks ORDER BY chunk;
