-- The leaking accounts only the pairs kept apart name (the ways the nodes' SGLang release does
-- not build) and not on the leaking list, $1 rows at most: their requests, the receiving
-- requests that would have read them, and the nodes; total = all such accounts.
WITH apart AS (
    SELECT * FROM reconstructed_other_ways
    WHERE cross_account
      AND leaker_account_id NOT IN (
          SELECT account_id FROM affected_accounts WHERE side = 'leaking'
      )
)
SELECT leaker_account_id AS account_id,
       count(DISTINCT leaker_request_id) AS requests,
       count(DISTINCT receiver_request_id) AS receivers,
       string_agg(DISTINCT node, ', ' ORDER BY node) AS nodes,
       max(tokens) AS tokens,
       count(*) OVER () AS total
FROM apart
GROUP BY leaker_account_id
ORDER BY requests DESC, receivers DESC, account_id
LIMIT $1;
