-- One replayed suspect.
INSERT INTO replay_results (request_id, verdict, reason, delivered_sha256, contaminated_sha256,
    clean_sha256, tokens, seconds, tokens_per_s, device, model, decode_node, output_tokens,
    foreign_slots, unwritten_slots, unwritten_share)
VALUES ($request_id, $verdict, $reason, $delivered_sha256, $contaminated_sha256, $clean_sha256,
    $tokens, $seconds, $tokens_per_s, $device, $model, $decode_node, $output_tokens,
    $foreign_slots, $unwritten_slots, $unwritten_share);
