-- The exposure runs in scope: a (receiver, leaker, node) pair's first read decides for every
-- run of the pair, so runs and token counts agree.
CREATE OR REPLACE TEMP TABLE kvf_scope_exposures AS
WITH pair AS (
    SELECT receiver_request_id, leaker_request_id, node, min(first_read_at) AS read_at
    FROM exposures GROUP BY ALL
)
SELECT e.* FROM exposures e
JOIN pair p USING (receiver_request_id, leaker_request_id, node)
WHERE kvf_in_scope(p.read_at, e.receiver_account_id, e.leaker_account_id,
                   $since::TIMESTAMPTZ, $until::TIMESTAMPTZ, $accounts::VARCHAR[]);
