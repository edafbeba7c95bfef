-- Drop the TEMP view made by notify_request_rows.
DROP VIEW IF EXISTS notify_request_rows;
