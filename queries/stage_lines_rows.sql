-- One staged row per non-blank JSON Lines line: the contract's fields as text ($paths lists their
-- JSON paths in the contract's column order, $names their names, $scalar whether each wants one
-- value), or why the line is unusable: a nested object or array where one value belongs is
-- quarantined, never loaded as its JSON text.
CREATE OR REPLACE TEMP TABLE staged_rows AS
SELECT src_row,
       CASE
           WHEN NOT json_valid(line) THEN 'line is not valid JSON'
           WHEN json_type(line) <> 'OBJECT' THEN 'line is not a JSON object'
           WHEN nested > 0 THEN 'field "' || $names[nested] || '" holds a JSON '
               || lower(types[nested]) || ' where one value (text or number) belongs'
       END AS parse_error,
       line AS raw,
       {projection}
FROM (
    SELECT *, list_position(list_transform(range(1, len($names) + 1),
               lambda i: coalesce(types[i] IN ('OBJECT', 'ARRAY') AND $scalar[i], false)), true)
               AS nested
    FROM (
        SELECT src_row, line,
               CASE WHEN json_valid(line) THEN
                   CASE WHEN json_type(line) = 'OBJECT' THEN json_extract_string(line, $paths) END
               END AS vals,
               CASE WHEN json_valid(line) THEN
                   CASE WHEN json_type(line) = 'OBJECT' THEN json_type(line, $paths) END
               END AS types
        FROM numbered_rows
        WHERE line IS NOT NULL AND trim(line) <> ''
    )
)
UNION ALL
SELECT rec, 'line does not parse: ' || reason, raw, {nulls}
FROM bad_rows;
CREATE OR REPLACE TEMP VIEW staged AS SELECT * FROM staged_rows;
