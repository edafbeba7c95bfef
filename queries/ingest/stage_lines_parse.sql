-- One chunk of lines (queries/ingest/stage_lines_chunks.sql) parsed: the contract's fields as
-- text ($paths lists their JSON paths in the contract's column order), the JSON types of those
-- that want one value ($scalar_paths), the line's own JSON type, and the first name an object
-- gives twice (JSON readers disagree on which of its values counts). Each line is parsed here
-- once for all (lines_parsed is a table, so that no later reference parses it again).
INSERT INTO lines_parsed
SELECT n.src_row, n.line,
       CASE WHEN json_valid(n.line) THEN
           CASE WHEN json_type(n.line) = 'OBJECT' THEN json_extract_string(n.line, $paths) END
       END AS vals,
       CASE WHEN json_valid(n.line) THEN
           CASE WHEN json_type(n.line) = 'OBJECT' THEN json_type(n.line, $scalar_paths) END
       END AS types,
       CASE WHEN json_valid(n.line) THEN json_type(n.line) END AS line_type,
       CASE WHEN json_valid(n.line) THEN
           CASE WHEN json_type(n.line) = 'OBJECT' THEN
               list_filter(json_keys(n.line), lambda k, i: list_position(json_keys(n.line), k) < i)[1]
           END
       END AS twice
FROM numbered_rows n
JOIN line_chunks c USING (src_row)
WHERE c.chunk = $chunk
ORDER BY n.src_row;
