-- Rows of the checked file: read, loaded, quarantined.
SELECT count(*) AS rows_read, count(*) FILTER (WHERE q IS NULL) AS rows_loaded,
       count(*) FILTER (WHERE q IS NOT NULL) AS rows_quarantined
FROM checked;
