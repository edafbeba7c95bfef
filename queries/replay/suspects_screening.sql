-- Suspect receivers flagged by screening: a reason in $suspect_reasons
-- (forensics.analysis.screening.SUSPECT_REASONS), as for possible_exposures.
SELECT DISTINCT request_id
FROM screening
WHERE len(list_intersect(reasons, $suspect_reasons)) > 0
ORDER BY request_id;
