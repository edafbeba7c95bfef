-- Record the columns files of one table were found to have: $files[i] has $columns[i] (the
-- lists are as long as each other).
INSERT INTO temp.ingest_columns
SELECT $table_name, unnest($files::VARCHAR[]), unnest($columns::VARCHAR[]);
