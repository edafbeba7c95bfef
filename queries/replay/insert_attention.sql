-- One (suspect, foreign writer) attention share of one run.
INSERT INTO replay_attention (request_id, leaker_request_id, share, slots, run_id)
VALUES ($request_id, $leaker_request_id, $share, $slots, $run_id);
