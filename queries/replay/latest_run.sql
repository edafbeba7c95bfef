-- The case's latest replay run, with what a repeat of it must match (forensics/replay/repeat.py):
-- the model as given and the SHA-256 of its files, the served-model name, the device, the tool
-- version, the suspects it replayed, and how many of them a run with the request log's model
-- has confirmed (this one or an earlier).
SELECT r.run_id, coalesce(r.model, '') AS model, coalesce(r.served_model, '') AS served_model,
       r.config_sha256, r.weight_sha256, r.device, r.tool_version,
       (SELECT list(x.request_id ORDER BY x.request_id) FROM replay_results x
        WHERE x.run_id = r.run_id) AS suspects,
       (SELECT count(DISTINCT x.request_id) FROM replay_results x
        WHERE x.verdict = 'confirmed' AND coalesce(x.model_matches, true)
          AND x.request_id IN (SELECT y.request_id FROM replay_results y
                               WHERE y.run_id = r.run_id)) AS confirmed
FROM replay_runs r
ORDER BY r.run_id DESC
LIMIT 1;
