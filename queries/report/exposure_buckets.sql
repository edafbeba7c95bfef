-- Cross-account receiving requests and their token exposures per time bucket ($1: 'second',
-- 'minute', 'hour', 'day' or 'week'; UTC, of each pair's first read) and node: the same
-- exposures as the headline's cross_tokens, so the buckets' tokens add up to it. Same-account
-- exposures are left out (the headline counts them apart).
SELECT date_trunc($1, timezone('UTC', first_read_at)) AS bucket, node,
       count(DISTINCT receiver_request_id) AS receivers, sum(tokens) AS tokens
FROM report_exposure_pairs
WHERE cross_account
GROUP BY ALL
ORDER BY bucket, node;
