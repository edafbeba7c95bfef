-- possible_exposures: for every screened suspect receiver that no ledger covers, every other
-- request served by the same decode node whose activity reaches into the window_s seconds
-- before the suspect arrived (received before it, and completed, or failing that answered or
-- received, no earlier than received_at - window): their KV may still have been in the pages.
-- Suspect reasons: $suspect_reasons (forensics.analysis.screening.SUSPECT_REASONS;
-- deferred-release-timeout alone does not make a receiver). A suspect that
-- kvforensics reconstruct replayed as a stub on its decode node gets the reconstructed pairs
-- (reconstructed_exposures) instead.
DELETE FROM possible_exposures;

INSERT INTO possible_exposures BY NAME
WITH suspect AS (
    SELECT s.request_id, s.account_id, s.decode_node, q.received_at
    FROM screening s JOIN work.analysis_requests q USING (request_id)
    WHERE NOT s.ledger_covered AND s.decode_node IS NOT NULL
      AND len(list_intersect(s.reasons, $suspect_reasons)) > 0
      AND NOT EXISTS (SELECT 1 FROM reconstructed_requests r
                      WHERE r.request_id = s.request_id AND r.node = s.decode_node AND r.stub)
)
SELECT s.request_id AS receiver_request_id, s.account_id AS receiver_account_id,
       l.request_id AS leaker_request_id, l.account_id AS leaker_account_id,
       s.decode_node AS node, s.account_id <> l.account_id AS cross_account
FROM suspect s
JOIN work.analysis_requests l
  ON l.serving_decode_node = s.decode_node AND l.request_id <> s.request_id
 AND l.received_at <= s.received_at
 AND coalesce(l.completed_at, l.first_token_at, l.received_at)
     >= s.received_at - to_microseconds(CAST($window_s * 1000000 AS BIGINT))
ORDER BY s.decode_node, s.request_id, l.request_id;
