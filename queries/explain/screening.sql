-- The screening row of each request explained: reasons, coverage of its decode node, signals.
SELECT request_id, list_sort(reasons) AS reasons, ttft_ms, expected_ttft_ms, ledger_covered,
       coverage, list_sort(signals) AS signals
FROM screening
WHERE request_id IN (SELECT request_id FROM explain_ids)
ORDER BY request_id;
