-- Per part of the case's external ledger, in path order: whether ingest quarantined some of its
-- rows, and whether it warned of a kept row whose request is not in the request log (the kv_events
-- view leaves out the anti-join and the request check for parts that have neither), and the
-- rows ingest read of it (the view splits scans that DuckDB would misjudge the size of).
SELECT f.rel,
       EXISTS (SELECT 1 FROM quarantine q
               WHERE q.table_name = 'kv_events' AND q.file = f.rel) AS flagged,
       EXISTS (SELECT 1 FROM ingest_warnings w
               WHERE w.table_name = 'kv_events' AND w.file = f.rel
                 AND w."column" = 'request_id') AS unknown,
       (SELECT max(i.rows_read) FROM input_files i WHERE i.path = f.rel) AS rows
FROM ledger_files f
ORDER BY f.rank;
