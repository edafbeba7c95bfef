-- The screening row of each request explained: reasons, coverage of its decode node, signals,
-- and where token-shortfall compared it, its window's figures (counter_windows).
SELECT s.request_id, list_sort(s.reasons) AS reasons, s.ttft_ms, s.expected_ttft_ms,
       s.ledger_covered, s.coverage, list_sort(s.signals) AS signals,
       w.node AS counter_node, w.first_ts AS counter_first_ts, w.last_ts AS counter_last_ts,
       w.batch_lines AS counter_batch_lines, w.requests AS counter_requests,
       w.basis AS counter_basis, w.engine_tokens AS counter_engine_tokens,
       w.billed_tokens AS counter_billed_tokens, w.shortfall AS counter_shortfall
FROM screening s
LEFT JOIN counter_window_requests c USING (request_id)
LEFT JOIN counter_windows w ON w.node = c.node AND w.window_no = c.window_no
WHERE s.request_id IN (SELECT request_id FROM explain_ids)
ORDER BY s.request_id;
