-- Quarantined rows of the checked part that carry seq (run only when the part has some).
SELECT count(*)
FROM flagged f JOIN staged s USING (src_row)
WHERE f.q IS NOT NULL AND s.seq IS NOT NULL;
