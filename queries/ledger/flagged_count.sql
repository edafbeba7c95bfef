-- Rows of the checked part that are quarantined.
SELECT count(*) FROM flagged WHERE q IS NOT NULL;
