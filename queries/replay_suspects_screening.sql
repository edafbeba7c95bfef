-- Suspect receivers found by screening only (any screening reason).
SELECT DISTINCT request_id
FROM screening
WHERE len(reasons) > 0
ORDER BY request_id;
