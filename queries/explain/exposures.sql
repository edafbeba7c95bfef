-- The ledger exposures of each request explained, both sides: whose KV it read (side 'read':
-- the other request is the leaker) and who read its KV (side 'read-by': the other request is
-- the receiver). Per other request, node and kind: the runs, slots, read and write times, the
-- pair's distinct slots on that node (exposure_tokens) and the slot ranges.
WITH sides AS (
    SELECT receiver_request_id AS request_id, 'read' AS side,
           leaker_request_id AS other_request_id, leaker_account_id AS other_account_id, *
    FROM exposures WHERE receiver_request_id IN (SELECT request_id FROM explain_ids)
    UNION ALL
    SELECT leaker_request_id, 'read-by', receiver_request_id, receiver_account_id, *
    FROM exposures WHERE leaker_request_id IN (SELECT request_id FROM explain_ids)
)
SELECT e.request_id, e.side, e.other_request_id, e.other_account_id, e.node, e.kind,
       count(*) AS runs, sum(e.slot_count) AS slots, any_value(t.tokens) AS tokens,
       min(e.first_read_at) AS first_read_at, max(e.last_read_at) AS last_read_at,
       min(e.first_write_at) AS first_write_at, max(e.last_write_at) AS last_write_at,
       string_agg(DISTINCT e.leaker_part, ',' ORDER BY e.leaker_part) AS leaker_part,
       bool_or(e.cross_account) AS cross_account,
       CASE WHEN bool_or(e.confidence = 'confirmed') THEN 'confirmed' ELSE 'ledger' END
           AS confidence,
       list({'first': e.slot_start, 'last': e.slot_start + e.slot_count - 1}
            ORDER BY e.slot_start) AS ranges
FROM sides e
LEFT JOIN exposure_tokens t
       ON t.receiver_request_id = e.receiver_request_id AND t.node = e.node
      AND t.leaker_request_id = e.leaker_request_id
GROUP BY e.request_id, e.side, e.other_request_id, e.other_account_id, e.node, e.kind
ORDER BY e.request_id, e.side, first_read_at, e.other_request_id, e.node, e.kind;
