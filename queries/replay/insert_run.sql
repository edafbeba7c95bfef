-- One replay run.
INSERT INTO replay_runs (run_id, started_at, finished_at, model, model_path, served_model,
    config_sha256, weight_files, weight_sha256, device, dtype, tool_version, suspects)
VALUES ($run_id, $started_at, $finished_at, $model, $model_path, $served_model, $config_sha256,
    $weight_files, $weight_sha256, $device, $dtype, $tool_version, $suspects);
