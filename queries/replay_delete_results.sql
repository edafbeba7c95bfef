-- Forget earlier replays of the suspects about to be replayed again.
DELETE FROM replay_results WHERE list_contains($request_ids, request_id);
