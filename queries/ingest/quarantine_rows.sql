-- The bad rows of one staged file into quarantine, with why ({checks}: as in insert.sql). Run
-- only when the file has some (fewer rows inserted than read): a second pass over the file.
INSERT INTO quarantine
SELECT $table_name, $file, src_row, q."column", q."value", q.reason
FROM ({checks}) WHERE q IS NOT NULL ORDER BY src_row;
