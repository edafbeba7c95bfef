-- The models the request log names.
SELECT DISTINCT model FROM work.analysis_requests ORDER BY model;
