-- One staged row per CSV record: the contract's columns as text, or the reason it did not parse.
CREATE OR REPLACE TEMP TABLE staged_rows AS
SELECT src_row, NULL::VARCHAR AS parse_error, NULL::VARCHAR AS raw, {projection}
FROM numbered_rows
UNION ALL
SELECT rec, 'row does not parse: ' || reason, raw, {nulls}
FROM bad_rows;
CREATE OR REPLACE TEMP VIEW staged AS SELECT * FROM staged_rows;
