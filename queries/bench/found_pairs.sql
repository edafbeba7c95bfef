-- bench_reconstruct, bench_ledger_free_vllm, bench_late_outputs: every affected request per
-- side, as the analysis lists it.
SELECT side, request_id, account_id FROM affected_requests;
