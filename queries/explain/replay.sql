-- Replay's results for each request explained, every run (replay_runs' order), wall-clock
-- columns left out so that a page stays the same when rebuilt.
SELECT request_id, run_id, verdict, basis, evidence_bits, reason, model, model_matches,
       decode_node, foreign_slots, uninitialised_slots, output_tokens, scored_tokens,
       delivered_sha256 = contaminated_sha256 AS contaminated_matches,
       delivered_sha256 = clean_sha256 AS clean_matches
FROM replay_results
WHERE request_id IN (SELECT request_id FROM explain_ids)
ORDER BY request_id, run_id NULLS FIRST, verdict;
