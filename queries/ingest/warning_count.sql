SELECT count(*) FROM ingest_warnings;
