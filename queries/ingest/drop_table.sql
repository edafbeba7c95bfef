-- Drop a derived table (re-ingest makes every later stage's tables stale).
DROP TABLE {table};
