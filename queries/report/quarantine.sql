-- Rows quarantined at ingest and warnings, per table, file and reason.
SELECT 'quarantined' AS status, table_name, file, reason, count(*) AS "rows"
FROM quarantine GROUP BY ALL
UNION ALL
SELECT 'warning', table_name, file, reason, count(*) FROM ingest_warnings GROUP BY ALL
ORDER BY status, table_name, file, reason;
