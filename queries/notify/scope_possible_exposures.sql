-- Screening's possible pairs in scope: no read is seen, so the receiving request's arrival
-- stands for its read.
CREATE OR REPLACE TEMP TABLE kvf_scope_possible_exposures AS
SELECT p.* FROM possible_exposures p
JOIN work.analysis_requests q ON q.request_id = p.receiver_request_id
WHERE kvf_in_scope(q.received_at, p.receiver_account_id, p.leaker_account_id,
                   $since::TIMESTAMPTZ, $until::TIMESTAMPTZ, $accounts::VARCHAR[]);
