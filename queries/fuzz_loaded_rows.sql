-- fuzz_ingest: rows of one input file in its table ({table}: an identifier quoted by the caller).
SELECT count(*) FROM {table} WHERE src_file = $p;
