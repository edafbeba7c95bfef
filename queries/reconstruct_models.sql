-- The models the request log names.
SELECT DISTINCT model FROM analysis_requests ORDER BY model;
