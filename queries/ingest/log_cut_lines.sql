-- Engine log lines cut short or damaged (_log_cut: file, line, the kinds of line they began
-- as) into quarantine, each with its reason. What such a line gives is used only where no
-- whole line gives the same value (forensics/logs/audit.py), and a reconstruction does not
-- take a cut `non-default args` line as the operator's arguments
-- (queries/reconstruct/engine_limits.sql).
INSERT INTO quarantine (table_name, file, "row", "column", "value", reason)
SELECT 'logs', file, line, NULL, kinds,
       'log line cut short or damaged (' || kinds || '): what it gives is used only where no '
       || 'whole line gives the same; give the engine''s whole log to read it'
FROM _log_cut
ORDER BY file, line;
