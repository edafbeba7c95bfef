-- One (suspect, foreign writer) attention share.
INSERT INTO replay_attention (request_id, leaker_request_id, share, slots)
VALUES ($request_id, $leaker_request_id, $share, $slots);
