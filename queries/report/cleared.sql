-- What positive evidence took off the lists, by evidence and reason: whole receivers and pairs.
SELECT evidence, reason,
       count(DISTINCT receiver_request_id) FILTER (WHERE leaker_request_id IS NULL) AS receivers,
       count(*) FILTER (WHERE leaker_request_id IS NOT NULL) AS pairs
FROM cleared_findings
GROUP BY evidence, reason
ORDER BY evidence, reason;
