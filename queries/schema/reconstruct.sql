-- Tables written by kvforensics reconstruct (also a stage of investigate): for nodes that have
-- no KV ledger, the page trace rebuilt from the request log with the node's real allocator.
-- Every row here is reconstructed, never logged: these tables are the flag.

-- One row per reconstructed node.
CREATE TABLE IF NOT EXISTS reconstructed_nodes (
    node           VARCHAR NOT NULL,     -- the engine node rebuilt
    role           VARCHAR NOT NULL,     -- prefill | decode | unified
    engine         VARCHAR,              -- as the nodes table or the logs give it
    engine_version VARCHAR,              -- as the nodes table or the logs give it
    allocator      VARCHAR NOT NULL,     -- sglang | vllm | lifo: the allocator driven
    allocator_version VARCHAR,           -- the engine package version driven (NULL for lifo)
    page_size      BIGINT NOT NULL,      -- slots per page
    pool_slots     BIGINT NOT NULL,      -- the node's KV pool in token slots
    requests       BIGINT NOT NULL,      -- requests the node served
    stubs          BIGINT NOT NULL,      -- requests modelled as 1-token stubs
    ambiguous_groups BIGINT NOT NULL,    -- groups of operations the timestamps do not order
                                         -- (vLLM unified node: decode-block schedules the
                                         -- log leaves open, less one)
    orders         BIGINT NOT NULL,      -- orders followed: per kept variant the logged one
                                         -- and every order of each ambiguous group applied
                                         -- to each distinct run (1 each when the timestamps
                                         -- decide); unified node: runs made
    deferred       BIGINT NOT NULL,      -- allocations that waited for a free (pool full)
    unread         BIGINT,               -- stubs still waiting at their first token in every
                                         -- explored run: first read not modelled
    variants       VARCHAR,              -- the scheduler and pool variants kept: those whose
                                         -- timestamps' order left fewest requests unread;
                                         -- for SGLang each names where its pool put freed
                                         -- pages back (--sglang-free-list)
    consistent     BOOLEAN,              -- vLLM unified node: some explored run of vLLM's v1
                                         -- scheduler reproduced every request's logged first
                                         -- token, completion and cached_tokens (NULL on
                                         -- other nodes)
    listed_free_list VARCHAR             -- SGLang node under --sglang-free-list version: the
                                         -- way its named release builds (staged, front,
                                         -- back), whose runs the lists take, the other ways'
                                         -- pairs kept apart; NULL: every way followed listed,
                                         -- or one stated
);

-- Per reconstructed request and node: what the request was modelled as.
CREATE TABLE IF NOT EXISTS reconstructed_requests (
    request_id VARCHAR NOT NULL,         -- the request
    node       VARCHAR NOT NULL,         -- the node it was rebuilt on
    stub       BOOLEAN NOT NULL,         -- prefill processed one token; decode read the rest
    reasons    VARCHAR[] NOT NULL,       -- the screening reasons that made it a stub
    waited     BOOLEAN,                  -- its allocation waited for a free (the pool was full)
    unread     BOOLEAN,                  -- still waiting at its first token in every explored
                                         -- run: its first read is not modelled (screening's
                                         -- possible pairs stand)
    contradicted BOOLEAN,                -- replay explained its delivered output by none of
                                         -- the explored layouts (none reproduces it and under
                                         -- the most likely one it is implausible): the rebuilt
                                         -- trace is not the engine's for this read
                                         -- (screening's pairs stand)
    sampled    BOOLEAN                   -- its first read came after the point where not
                                         -- every order the timestamps leave open could be
                                         -- followed: its exposures are over the logged order,
                                         -- --orders - 1 shuffled ones and the one that takes
                                         -- every group's frees first, a sample
);

-- Nodes without a ledger that reconstruction could not rebuild, with the reason and the fix.
CREATE TABLE IF NOT EXISTS reconstruct_skipped (
    node   VARCHAR NOT NULL,  -- the node
    reason VARCHAR NOT NULL   -- why, and what would let it run
);

-- The reconstructed events of the first explored order (timestamps order, ties broken by
-- request id), in the kv_events vocabulary; ts is the gateway time the operation is tied to.
CREATE TABLE IF NOT EXISTS reconstructed_events (
    ts          TIMESTAMPTZ NOT NULL,    -- the gateway time the operation is tied to (UTC)
    seq         BIGINT NOT NULL,         -- per-node order of the rebuilt events
    node        VARCHAR NOT NULL,        -- engine node
    request_id  VARCHAR NOT NULL,        -- the request
    op          VARCHAR NOT NULL,        -- alloc | write | read | free
    slot_start  BIGINT NOT NULL,         -- first slot of the range
    slot_count  BIGINT NOT NULL,         -- slots in the range
    pos_start   BIGINT,                  -- sequence position held by slot_start
    source      VARCHAR                  -- write: transfer | decode (prefill: prefill)
);

-- One row per (receiver, leaker, node) found in at least one explored order.
CREATE TABLE IF NOT EXISTS reconstructed_exposures (
    receiver_request_id VARCHAR NOT NULL,  -- the request that read the data
    receiver_account_id VARCHAR NOT NULL,  -- its account
    leaker_request_id   VARCHAR NOT NULL,  -- the request whose data was read
    leaker_account_id   VARCHAR NOT NULL,  -- its account
    node                VARCHAR NOT NULL,  -- the decode node
    tokens              BIGINT NOT NULL,  -- slots read, most over the orders that have the pair
    support             DOUBLE NOT NULL,  -- share of the explored runs that made the
                                          -- receiver's read in which the pair appears
    read_at             TIMESTAMPTZ NOT NULL,  -- the receiver's first token (UTC)
    cross_account       BOOLEAN NOT NULL,  -- the accounts differ
    verdict             VARCHAR,          -- replay: confirmed | cleared; NULL: not decided
    free_lists          VARCHAR[]         -- SGLang node: the ways its allocator may put freed
                                          -- pages back (staged, front, back) under which a
                                          -- run has the pair; NULL on other nodes
);

-- Under --sglang-free-list version, on an SGLang node that names its release: the pairs only
-- the runs of the ways that release does not build have (and replay did not decide). They are
-- not in the lists; they are who would be a possible leaker were the node not built as its
-- release builds it.
CREATE TABLE IF NOT EXISTS reconstructed_other_ways (
    receiver_request_id VARCHAR NOT NULL,  -- the request that would have read the data
    receiver_account_id VARCHAR NOT NULL,  -- its account
    leaker_request_id   VARCHAR NOT NULL,  -- the request whose data it would have read
    leaker_account_id   VARCHAR NOT NULL,  -- its account
    node                VARCHAR NOT NULL,  -- the decode node
    tokens              BIGINT NOT NULL,   -- slots read, most over the runs that have the pair
    support             DOUBLE NOT NULL,   -- share of those ways' runs that made the
                                           -- receiver's read in which the pair appears
    read_at             TIMESTAMPTZ NOT NULL,  -- the receiver's first token (UTC)
    cross_account       BOOLEAN NOT NULL,  -- the accounts differ
    free_lists          VARCHAR[] NOT NULL -- the ways whose runs have the pair
);

-- Case databases reconstructed before replay decided get the verdict column.
ALTER TABLE reconstructed_exposures ADD COLUMN IF NOT EXISTS verdict VARCHAR;
ALTER TABLE reconstructed_exposures ADD COLUMN IF NOT EXISTS free_lists VARCHAR[];
ALTER TABLE reconstructed_nodes ADD COLUMN IF NOT EXISTS unread BIGINT;
ALTER TABLE reconstructed_nodes ADD COLUMN IF NOT EXISTS variants VARCHAR;
ALTER TABLE reconstructed_nodes ADD COLUMN IF NOT EXISTS consistent BOOLEAN;
ALTER TABLE reconstructed_nodes ADD COLUMN IF NOT EXISTS listed_free_list VARCHAR;
ALTER TABLE reconstructed_requests ADD COLUMN IF NOT EXISTS waited BOOLEAN;
ALTER TABLE reconstructed_requests ADD COLUMN IF NOT EXISTS unread BOOLEAN;
ALTER TABLE reconstructed_requests ADD COLUMN IF NOT EXISTS contradicted BOOLEAN;
ALTER TABLE reconstructed_requests ADD COLUMN IF NOT EXISTS sampled BOOLEAN;
