-- bench_reconstruct: the receivers screening alone suspects where no ledger covers them.
SELECT request_id, account_id FROM screening
WHERE NOT ledger_covered
  AND len(list_intersect(reasons, ['over-pool', 'fast-ttft', 'engine-rejected'])) > 0;
