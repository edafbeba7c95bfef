-- One replayed suspect of one run; model_matches: the run's model is the one the request log
-- names for the suspect (a request logged without a model name matches a run whose name was
-- given explicitly with --served-model).
INSERT INTO replay_results (request_id, verdict, reason, delivered_sha256, contaminated_sha256,
    clean_sha256, tokens, seconds, tokens_per_s, device, model, decode_node, output_tokens,
    foreign_slots, uninitialised_slots, uninitialised_share, run_id, model_matches, basis,
    evidence_bits, scored_tokens, tokens_for_contamination, tokens_for_clean, largest_token_bits,
    smallest_token_bits, contaminated_bits_per_token, sampling_bits_per_token, plausibility_z,
    score_temperature)
VALUES ($request_id, $verdict, $reason, $delivered_sha256, $contaminated_sha256, $clean_sha256,
    $tokens, $seconds, $tokens_per_s, $device, $model, $decode_node, $output_tokens,
    $foreign_slots, $uninitialised_slots, $uninitialised_share, $run_id,
    EXISTS (SELECT 1 FROM requests WHERE request_id = $request_id
            AND (model = $served_model OR (NULLIF(trim(model), '') IS NULL AND $served_explicit))),
    $basis, $evidence_bits, $scored_tokens, $tokens_for_contamination, $tokens_for_clean,
    $largest_token_bits, $smallest_token_bits, $contaminated_bits_per_token,
    $sampling_bits_per_token, $plausibility_z, $score_temperature);
