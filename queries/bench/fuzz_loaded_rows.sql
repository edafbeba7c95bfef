-- fuzz_ingest: rows of one input file in its table ({table}: the table's quoted name).
SELECT count(*) FROM {table} WHERE src_file = $p;
