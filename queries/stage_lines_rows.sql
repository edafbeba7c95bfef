-- One staged row per non-blank JSON Lines line: the contract's fields as text ($paths lists their
-- JSON paths in the contract's column order), or why the line is unusable.
CREATE OR REPLACE TEMP TABLE staged_rows AS
SELECT src_row,
       CASE
           WHEN NOT json_valid(line) THEN 'line is not valid JSON'
           WHEN json_type(line) <> 'OBJECT' THEN 'line is not a JSON object'
       END AS parse_error,
       line AS raw,
       {projection}
FROM (
    SELECT src_row, line,
           CASE WHEN json_valid(line) THEN
               CASE WHEN json_type(line) = 'OBJECT' THEN json_extract_string(line, $paths) END
           END AS vals
    FROM numbered_rows
    WHERE line IS NOT NULL AND trim(line) <> ''
)
UNION ALL
SELECT rec, 'line does not parse: ' || reason, raw, {nulls}
FROM bad_rows;
CREATE OR REPLACE TEMP VIEW staged AS SELECT * FROM staged_rows;
