-- Forget earlier attention shares of the suspects about to be replayed again.
DELETE FROM replay_attention WHERE list_contains($request_ids, request_id);
