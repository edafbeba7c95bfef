-- Requests that read another request's data, per time bucket ($1: 'second', 'minute', 'hour', 'day' or
-- 'week'; UTC) and node.
SELECT date_trunc($1, timezone('UTC', first_read_at)) AS bucket, node,
       count(DISTINCT receiver_request_id) AS receivers, sum(tokens) AS tokens
FROM report_exposure_pairs
GROUP BY ALL
ORDER BY bucket, node;
