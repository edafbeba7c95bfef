-- Whose KV each request explained read (exposures, receiver side): per leaker, node and kind,
-- the runs, slots and read times, and the leaker's distinct slots read on that node
-- (exposure_tokens).
SELECT e.receiver_request_id AS request_id, e.leaker_request_id AS other_request_id,
       e.leaker_account_id AS other_account_id, e.node, e.kind, count(*) AS runs,
       sum(e.slot_count) AS slots, any_value(t.tokens) AS tokens,
       min(e.first_read_at) AS first_read_at, max(e.last_read_at) AS last_read_at,
       min(e.first_write_at) AS first_write_at, max(e.last_write_at) AS last_write_at,
       string_agg(DISTINCT e.leaker_part, ',' ORDER BY e.leaker_part) AS leaker_part,
       bool_or(e.cross_account) AS cross_account,
       CASE WHEN bool_or(e.confidence = 'confirmed') THEN 'confirmed' ELSE 'ledger' END
           AS confidence,
       list({'first': e.slot_start, 'last': e.slot_start + e.slot_count - 1}
            ORDER BY e.slot_start) AS ranges
FROM exposures e
LEFT JOIN exposure_tokens t
       ON t.receiver_request_id = e.receiver_request_id AND t.node = e.node
      AND t.leaker_request_id = e.leaker_request_id
WHERE e.receiver_request_id IN (SELECT request_id FROM explain_ids)
GROUP BY e.receiver_request_id, e.leaker_request_id, e.leaker_account_id, e.node, e.kind
ORDER BY request_id, first_read_at, other_request_id, node, kind;
