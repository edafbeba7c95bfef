-- Per suspect of one run: whether the run's model is the one the request log names for it.
SELECT request_id, COALESCE(model_matches, false)
FROM replay_results
WHERE run_id = $run_id
ORDER BY request_id;
