-- The analysis' working tables, in the schema `work`, apart from the results: integer codes
-- and the request log as the analysis reads it. Each analysis run rewrites them. (The compiled
-- sweep's output is held in temporary tables for the time of the analysis only:
-- queries/analysis/pieces_create.sql.)
CREATE SCHEMA IF NOT EXISTS work;

-- Integer code of every request id in the ledger, dense and in request_id order.
CREATE TABLE IF NOT EXISTS work.analysis_request_codes (
    request_id VARCHAR,   -- the request id as in kv_events
    req_code   INTEGER    -- its code in the sweep (0, 1, 2, ... in request_id order)
);

-- Integer code of every content hash in the ledger, dense and in content_hash order.
CREATE TABLE IF NOT EXISTS work.analysis_hash_codes (
    content_hash VARCHAR, -- the content hash as in kv_events
    hash_code    INTEGER  -- its code in the sweep
);

-- One row per request id of the gateway log (the first in file order when an id repeats),
-- with the nodes that served it.
CREATE TABLE IF NOT EXISTS work.analysis_requests (
    request_id           VARCHAR,      -- as in requests
    account_id           VARCHAR,      -- as in requests
    model                VARCHAR,      -- as in requests
    received_at          TIMESTAMPTZ,  -- as in requests
    first_token_at       TIMESTAMPTZ,  -- as in requests
    completed_at         TIMESTAMPTZ,  -- as in requests
    http_status          INTEGER,      -- as in requests
    prompt_tokens        BIGINT,       -- as in requests
    completion_tokens    BIGINT,       -- as in requests
    prefill_node         VARCHAR,      -- as in requests
    decode_node          VARCHAR,      -- as in requests
    node                 VARCHAR,      -- as in requests, else the case's one engine node
    response_sha256      VARCHAR,      -- as in requests
    src_file             VARCHAR,      -- as in requests
    src_row              BIGINT,       -- as in requests
    cached_tokens        BIGINT,       -- as in requests
    temperature          DOUBLE,       -- as in requests
    top_p                DOUBLE,       -- as in requests
    top_k                BIGINT,       -- as in requests
    seed                 BIGINT,       -- as in requests
    serving_prefill_node VARCHAR,      -- prefill_node, else node
    serving_decode_node  VARCHAR       -- decode_node, else node, else prefill_node
);
