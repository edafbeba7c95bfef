-- The evidence each node was judged on (node_evidence), by node.
SELECT node, role, requests, ledger_events, holes, uncovered_requests, evidence, note
FROM node_evidence
ORDER BY node;
