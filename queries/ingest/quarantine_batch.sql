-- The bad rows of a batch of staged files into quarantine, each under its own file and row (as
-- insert_batch.sql names them), in file and then row order; run only when the batch has some.
INSERT INTO quarantine
SELECT $table_name, kvf_of_part($files, src_row, $rank),
       src_row % 1099511627776, q."column", q."value", q.reason
FROM ({checks}) WHERE q IS NOT NULL ORDER BY src_row;
