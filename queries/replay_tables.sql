-- Which of the tables replay reads or updates exist in the case database.
SELECT table_name
FROM information_schema.tables
WHERE table_name IN ('exposures', 'screening', 'contents', 'kv_events', 'requests',
                     'affected_requests', 'affected_accounts')
ORDER BY table_name;
