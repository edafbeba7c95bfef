-- One staged row per non-blank JSON Lines line, from lines_parsed
-- (queries/ingest/stage_lines_parse.sql): the contract's fields as text, or why the line is
-- unusable. A nested object or array where one value belongs ($scalar_names: the columns that
-- want one value) is quarantined, never loaded as its JSON text.
CREATE OR REPLACE TEMP TABLE staged_rows AS
SELECT src_row,
       CASE
           WHEN line_type IS NULL THEN 'line is not valid JSON'
           WHEN line_type <> 'OBJECT' THEN 'line is not a JSON object'
           WHEN twice IS NOT NULL THEN 'line names the field "' || twice || '" twice; which of '
               || 'its values is meant cannot be known, so write it once'
           WHEN nested IS NOT NULL THEN 'field "' || $scalar_names[nested] || '" holds a JSON '
               || lower(types[nested]) || ' where one value (text or number) belongs'
       END AS parse_error,
       line AS raw,
       {projection}
FROM (
    SELECT *,
           CASE
               WHEN coalesce(list_position(types, 'OBJECT'), 0) = 0
                   THEN nullif(coalesce(list_position(types, 'ARRAY'), 0), 0)
               WHEN coalesce(list_position(types, 'ARRAY'), 0) = 0
                   THEN list_position(types, 'OBJECT')
               ELSE least(list_position(types, 'OBJECT'), list_position(types, 'ARRAY'))
           END AS nested
    FROM lines_parsed
)
UNION ALL
SELECT rec, 'line does not parse: ' || reason, raw, {nulls}
FROM bad_rows;
DROP TABLE lines_parsed;
DROP TABLE line_chunks;
CREATE OR REPLACE TEMP VIEW staged AS SELECT * FROM staged_rows;
