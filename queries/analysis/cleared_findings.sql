-- cleared_findings: what positive evidence took off the notification lists, with the reason
-- (docs/DESIGN.md §4, "Evidence only adds": a finding leaves the lists only this way, never
-- because a source is missing). leaker_request_id NULL: the receiver as a whole.
--   ledger  a screened suspect whose decode node's ledger is complete over its whole activity
--           (screening.ledger_covered) and shows no read of another account's data;
--   replay  reconstruction replayed the explored layouts of a stub's pages and one reproduced
--           the delivered output: a pair found only in layouts that did not reproduce it is
--           cleared, and the receiver as a whole when no reproducing layout holds another
--           account's data.
DELETE FROM cleared_findings;

INSERT INTO cleared_findings BY NAME
SELECT s.request_id AS receiver_request_id, s.account_id AS receiver_account_id,
       CAST(NULL AS VARCHAR) AS leaker_request_id, CAST(NULL AS VARCHAR) AS leaker_account_id,
       s.decode_node AS node, 'ledger' AS evidence,
       'the complete ledger of its decode node records its reads; none saw another account''s data'
           AS reason
FROM screening s
WHERE s.ledger_covered AND len(list_intersect(s.reasons, $suspect_reasons)) > 0
  AND NOT EXISTS (SELECT 1 FROM exposure_tokens e
                  WHERE e.receiver_request_id = s.request_id AND e.cross_account)
UNION ALL
SELECT receiver_request_id, receiver_account_id, leaker_request_id, leaker_account_id, node,
       'replay',
       'replay reproduced the delivered output from a layout of the pages without this request''s data'
FROM reconstructed_exposures
WHERE verdict = 'cleared' AND cross_account
UNION ALL
SELECT receiver_request_id, receiver_account_id, NULL, NULL, node, 'replay',
       'replay reproduced the delivered output from a layout that holds no other account''s data'
FROM reconstructed_exposures
GROUP BY receiver_request_id, receiver_account_id, node
HAVING bool_or(verdict IS NOT NULL) AND NOT bool_or(verdict = 'confirmed' AND cross_account)
ORDER BY 1, 3 NULLS FIRST, 5;
