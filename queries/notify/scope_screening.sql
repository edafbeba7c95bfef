-- Screened requests in scope: arrival in the period and, with accounts given, the request's
-- own account among them.
CREATE OR REPLACE TEMP TABLE kvf_scope_screening AS
SELECT s.* FROM screening s
JOIN work.analysis_requests q USING (request_id)
WHERE kvf_in_scope(q.received_at, s.account_id, s.account_id,
                   $since::TIMESTAMPTZ, $until::TIMESTAMPTZ, $accounts::VARCHAR[]);
