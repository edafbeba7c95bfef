-- Tables written by kvforensics reconstruct (also a stage of investigate): for nodes that have
-- no KV ledger, the page trace rebuilt from the request log with the node's real allocator.
-- Every row here is reconstructed, never logged: these tables are the flag.

-- One row per reconstructed node.
CREATE TABLE IF NOT EXISTS reconstructed_nodes (
    node           VARCHAR NOT NULL,
    role           VARCHAR NOT NULL,     -- prefill | decode | unified
    engine         VARCHAR,              -- as the nodes table or the logs give it
    engine_version VARCHAR,
    allocator      VARCHAR NOT NULL,     -- sglang | vllm | lifo: the allocator driven
    allocator_version VARCHAR,           -- the engine package version driven (NULL for lifo)
    page_size      BIGINT NOT NULL,
    pool_slots     BIGINT NOT NULL,
    requests       BIGINT NOT NULL,
    stubs          BIGINT NOT NULL,      -- requests modelled as 1-token stubs
    ambiguous_groups BIGINT NOT NULL,    -- groups of operations the timestamps do not order
    orders         BIGINT NOT NULL,      -- orders explored (1: the timestamps decide)
    deferred       BIGINT NOT NULL       -- allocations that waited for a free (pool full)
);

-- Per reconstructed request and node: what the request was modelled as.
CREATE TABLE IF NOT EXISTS reconstructed_requests (
    request_id VARCHAR NOT NULL,
    node       VARCHAR NOT NULL,
    stub       BOOLEAN NOT NULL,         -- prefill processed one token; decode read the rest
    reasons    VARCHAR[] NOT NULL        -- the screening reasons that made it a stub
);

-- The reconstructed events of the first explored order (timestamps order, ties broken by
-- request id), in the kv_events vocabulary; ts is the gateway time the operation is tied to.
CREATE TABLE IF NOT EXISTS reconstructed_events (
    ts          TIMESTAMP NOT NULL,
    seq         BIGINT NOT NULL,
    node        VARCHAR NOT NULL,
    request_id  VARCHAR NOT NULL,
    op          VARCHAR NOT NULL,        -- alloc | write | read | free
    slot_start  BIGINT NOT NULL,
    slot_count  BIGINT NOT NULL,
    pos_start   BIGINT,
    source      VARCHAR                  -- write: transfer | decode (prefill: prefill)
);

-- One row per (receiver, leaker, node) found in at least one explored order.
CREATE TABLE IF NOT EXISTS reconstructed_exposures (
    receiver_request_id VARCHAR NOT NULL,
    receiver_account_id VARCHAR NOT NULL,
    leaker_request_id   VARCHAR NOT NULL,
    leaker_account_id   VARCHAR NOT NULL,
    node                VARCHAR NOT NULL,
    tokens              BIGINT NOT NULL,  -- slots read, most over the orders that have the pair
    support             DOUBLE NOT NULL,  -- share of explored orders in which the pair appears
    read_at             TIMESTAMP NOT NULL,
    cross_account       BOOLEAN NOT NULL,
    verdict             VARCHAR           -- replay: confirmed | cleared; NULL: not decided
);

-- Case databases reconstructed before replay decided get the verdict column.
ALTER TABLE reconstructed_exposures ADD COLUMN IF NOT EXISTS verdict VARCHAR;
