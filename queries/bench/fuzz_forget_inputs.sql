-- fuzz_ingest: forget the files of the last ingest, so that the next one always loads.
DELETE FROM input_files;
