-- What positive evidence cleared for each request explained (cleared_findings), either side.
SELECT receiver_request_id AS request_id, 'receiving' AS side,
       leaker_request_id AS other_request_id, node, evidence, reason
FROM cleared_findings WHERE receiver_request_id IN (SELECT request_id FROM explain_ids)
UNION ALL
SELECT leaker_request_id, 'leaking', receiver_request_id, node, evidence, reason
FROM cleared_findings WHERE leaker_request_id IN (SELECT request_id FROM explain_ids)
ORDER BY request_id, side, other_request_id NULLS FIRST, node, evidence, reason;
