-- The tap's reports and unfinished parts (_tap_rows) into tap_reports; unreadable lines
-- (_tap_bad) into quarantine.
INSERT INTO tap_reports SELECT * FROM _tap_rows;
INSERT INTO quarantine (table_name, file, "row", "column", "value", reason)
SELECT 'tap', file, "row", NULL, NULL, reason FROM _tap_bad;
