-- Move the good rows of a batch of staged files (stage_parquet_batch.sql) into {table}, as
-- insert.sql does for one: each row's src_file is its own file's name ($files, in rank order,
-- the first's rank $rank) and src_row its row in that file. The rows are written in file and
-- then row order (input_order), as files loaded one at a time are: a scan of several files
-- hands them on in the order its threads read them. Returns the rows inserted.
INSERT INTO {table} BY NAME
SELECT * EXCLUDE (q, src_row),
       kvf_of_part($files, src_row, $rank) AS src_file,
       src_row % 1099511627776 AS src_row
FROM ({checks}) WHERE q IS NULL
ORDER BY input_order;
