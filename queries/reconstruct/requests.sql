-- The requests a ledger-less node served, in gateway-time order, with what reconstruction needs:
-- times in microseconds since the epoch, lengths, the prefix-cache hits the usage reported
-- (cached_tokens), and the screening reasons that say the prefill processed a 1-token stub
-- (over-pool, engine-rejected, fast-ttft, cache-implausible, token-shortfall).
SELECT q.request_id, q.account_id, q.http_status,
       epoch_us(q.received_at) AS received_us,
       epoch_us(q.first_token_at) AS first_token_us,
       epoch_us(q.completed_at) AS completed_us,
       q.prompt_tokens, coalesce(q.completion_tokens, 0) AS completion_tokens, q.cached_tokens,
       list_filter(coalesce(s.reasons, []),
                   lambda r: list_contains($stub_reasons, r)) AS stub_reasons
FROM work.analysis_requests q
LEFT JOIN screening s USING (request_id)
WHERE (q.serving_prefill_node = $node AND $role <> 'decode')
   OR (q.serving_decode_node = $node AND $role <> 'prefill')
ORDER BY q.received_at, q.request_id;
