-- Views over the analysis tables that answer the common questions. Created (replaced) by the
-- analysis stage; joins use `nodes`, which holds one row per node, so no join multiplies rows.

-- Who received whose data: one row per (receiving account, leaking account), cross-account
-- and same-account alike. The request counts are per pair: a request that read KV of two
-- accounts is counted under both pairs, so they do not add up across pairs; the counts per
-- account are in account_exposure.
CREATE OR REPLACE VIEW account_pair_exposure AS
SELECT t.receiver_account_id, t.leaker_account_id, t.cross_account,
       count(DISTINCT t.receiver_request_id) AS receiving_requests,
       count(DISTINCT t.leaker_request_id) AS leaking_requests,
       CAST(sum(t.tokens) AS BIGINT) AS tokens,
       count(DISTINCT t.node) AS nodes,
       min(t.first_read_at) AS first_read_at, max(t.last_read_at) AS last_read_at
FROM exposure_tokens t
GROUP BY t.receiver_account_id, t.leaker_account_id, t.cross_account;

COMMENT ON VIEW account_pair_exposure IS 'One row per (receiving account, leaking account): requests on each side of that pair (a request counts under every pair it is in, so these counts do not add across pairs: account_exposure has them per account), tokens (distinct slots per request pair and node, summed; these add up), nodes, first and last read.';

-- Per account and side, its requests counted once each: what summing account_pair_exposure's
-- request counts over an account would overstate.
CREATE OR REPLACE VIEW account_exposure AS
SELECT 'receiving' AS side, receiver_account_id AS account_id, cross_account,
       count(DISTINCT receiver_request_id) AS requests, CAST(sum(tokens) AS BIGINT) AS tokens,
       count(DISTINCT leaker_account_id) AS counterpart_accounts
FROM exposure_tokens GROUP BY receiver_account_id, cross_account
UNION ALL
SELECT 'leaking', leaker_account_id, cross_account, count(DISTINCT leaker_request_id),
       CAST(sum(tokens) AS BIGINT), count(DISTINCT receiver_account_id)
FROM exposure_tokens GROUP BY leaker_account_id, cross_account;

COMMENT ON VIEW account_exposure IS 'One row per (side, account, cross_account): the account''s requests on that side counted once each, their tokens and the accounts on the other side; cross_account false rows are same-account exposures (never notified).';

-- Per exposure run, the evidence around it: both requests' times and status, the node's facts.
CREATE OR REPLACE VIEW request_evidence AS
SELECT e.receiver_request_id, e.receiver_account_id, r.received_at AS receiver_received_at,
       r.first_token_at AS receiver_first_token_at, r.completed_at AS receiver_completed_at,
       r.http_status AS receiver_http_status, r.prompt_tokens AS receiver_prompt_tokens,
       e.leaker_request_id, e.leaker_account_id, l.received_at AS leaker_received_at,
       e.node, n.role AS node_role, n.pool_slots AS node_pool_slots,
       n.context_len AS node_context_len, e.kind, e.confidence, e.cross_account,
       e.slot_start, e.slot_count, e.leaker_part, e.first_read_at, e.last_read_at,
       e.first_write_at, e.last_write_at
FROM exposures e
LEFT JOIN (SELECT * FROM requests
           QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY src_file, src_row) = 1) r
    ON r.request_id = e.receiver_request_id
LEFT JOIN (SELECT * FROM requests
           QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY src_file, src_row) = 1) l
    ON l.request_id = e.leaker_request_id
LEFT JOIN nodes n ON n.node = e.node;

COMMENT ON VIEW request_evidence IS 'One row per exposure run with the receiving and leaking requests'' times and status (first row of each request id) and the node''s role, pool and context length.';
