-- The nodes each request explained ran on (its gateway row's prefill, decode or single node, and
-- any node where the ledger or the analysis places it), with the evidence each node was judged
-- on (node_evidence; NULL where the analysis has no row for it).
WITH placed AS (
    SELECT request_id, prefill_node AS node, 'prefill' AS part FROM requests
    WHERE request_id IN (SELECT request_id FROM explain_ids) AND prefill_node IS NOT NULL
    UNION
    SELECT request_id, decode_node, 'decode' FROM requests
    WHERE request_id IN (SELECT request_id FROM explain_ids) AND decode_node IS NOT NULL
    UNION
    SELECT request_id, node, 'serving' FROM requests
    WHERE request_id IN (SELECT request_id FROM explain_ids) AND node IS NOT NULL
    UNION
    SELECT receiver_request_id, node, 'read' FROM exposures
    WHERE receiver_request_id IN (SELECT request_id FROM explain_ids)
    UNION
    SELECT leaker_request_id, node, 'written' FROM exposures
    WHERE leaker_request_id IN (SELECT request_id FROM explain_ids)
)
SELECT p.request_id, p.node, string_agg(DISTINCT p.part, ',' ORDER BY p.part) AS parts,
       any_value(e.role) AS role, any_value(e.evidence) AS evidence, any_value(e.note) AS note,
       any_value(e.ledger_events) AS ledger_events, any_value(e.holes) AS holes
FROM placed p LEFT JOIN node_evidence e USING (node)
GROUP BY p.request_id, p.node
ORDER BY p.request_id, p.node;
