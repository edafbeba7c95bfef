-- Suspects of this run that an earlier run with the request log's model confirmed: their
-- confirmation stands whatever this run found.
SELECT DISTINCT request_id
FROM replay_results
WHERE verdict = 'confirmed' AND COALESCE(model_matches, true) AND run_id IS DISTINCT FROM $run_id
  AND list_contains($request_ids, request_id)
ORDER BY request_id;
