-- The keys used by the JSON objects of one chunk of a JSON Lines file's lines
-- (queries/ingest/stage_lines_chunks.sql).
SELECT DISTINCT unnest(json_keys(n.line)) AS key
FROM numbered_rows n
JOIN line_chunks c USING (src_row)
WHERE c.chunk = $chunk
  AND CASE WHEN json_valid(n.line) THEN json_type(n.line) = 'OBJECT' ELSE false END;
