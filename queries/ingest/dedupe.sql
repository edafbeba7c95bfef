-- Quarantine every later row of {table} whose {key} was already seen (files by path, rows in
-- order); the first occurrence stays.
CREATE OR REPLACE TEMP TABLE dup_rows AS
SELECT src_file, src_row, {key} AS key_value, first_file, first_row
FROM (
    SELECT src_file, src_row, {key},
           row_number() OVER w AS n,
           first_value(src_file) OVER w AS first_file, first_value(src_row) OVER w AS first_row
    FROM {table}
    WINDOW w AS (PARTITION BY {key} ORDER BY src_file, src_row
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
WHERE n > 1;
INSERT INTO quarantine
SELECT $table_name, src_file, src_row, $key_name, key_value,
       'duplicate ' || $key_name || ' (first seen at ' || first_file || ' row ' || first_row || ')'
FROM dup_rows ORDER BY src_file, src_row;
DELETE FROM {table} t USING dup_rows d WHERE t.src_file = d.src_file AND t.src_row = d.src_row;
