-- Drop the TEMP tables and view the notification lists were built in.
DROP VIEW IF EXISTS notify_request_rows;
DROP TABLE IF EXISTS notify_lists;
DROP TABLE IF EXISTS notify_rules;
