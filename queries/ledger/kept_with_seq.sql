-- Rows of the checked part that are kept (not quarantined) and carry seq. A kept row's seq is
-- an integer or absent, so its raw value being present is the same as its typed one.
SELECT count(*)
FROM staged s
WHERE s.seq IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM flagged f WHERE f.q IS NOT NULL AND f.src_row = s.src_row);
