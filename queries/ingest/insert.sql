-- Move the checked rows of one file into {table} (good rows) and quarantine (bad rows).
INSERT INTO {table} BY NAME
SELECT * EXCLUDE (q), $file AS src_file FROM checked WHERE q IS NULL;
INSERT INTO quarantine
SELECT $table_name, $file, src_row, q."column", q."value", q.reason
FROM checked WHERE q IS NOT NULL ORDER BY src_row;
