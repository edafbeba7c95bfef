-- Benchmark only: fill affected_requests / affected_accounts from synthetic exposures (runs in
-- the synthetic case never overlap, so slot_count sums are exact token counts).
INSERT INTO affected_requests
SELECT side, request_id, any_value(account_id), 'ledger', sum(slot_count),
       count(DISTINCT other), min(seen_at), max(seen_at)
FROM (
    SELECT 'receiving' AS side, receiver_request_id AS request_id,
           receiver_account_id AS account_id, leaker_request_id AS other, slot_count,
           first_read_at AS seen_at
    FROM exposures WHERE cross_account
    UNION ALL
    SELECT 'leaking', leaker_request_id, leaker_account_id, receiver_request_id, slot_count,
           first_read_at
    FROM exposures WHERE cross_account
) GROUP BY side, request_id;

INSERT INTO affected_accounts
SELECT side, account_id, NULL, NULL, NULL, 'ledger', count(DISTINCT request_id), sum(slot_count),
       min(seen_at), max(seen_at), count(DISTINCT other_account)
FROM (
    SELECT 'receiving' AS side, receiver_account_id AS account_id,
           receiver_request_id AS request_id, leaker_account_id AS other_account, slot_count,
           first_read_at AS seen_at
    FROM exposures WHERE cross_account
    UNION ALL
    SELECT 'leaking', leaker_account_id, leaker_request_id, receiver_account_id, slot_count,
           first_read_at
    FROM exposures WHERE cross_account
) GROUP BY side, account_id;
