-- Tables written by the analysis stage (kvforensics analyze). Each stage drops and rewrites its
-- own tables, so any stage can be re-run alone.

-- One row per (receiver request, leaker request, node, kind, contiguous slot run).
CREATE TABLE IF NOT EXISTS exposures (
    receiver_request_id VARCHAR NOT NULL,  -- the request that read another request's data
    receiver_account_id VARCHAR,          -- NULL when the request is not in the request log
    leaker_request_id   VARCHAR NOT NULL,  -- the request whose data was read
    leaker_account_id   VARCHAR,  -- its account (NULL when not in the request log)
    node                VARCHAR NOT NULL,  -- engine node where it happened
    slot_start          BIGINT NOT NULL,  -- first slot of the contiguous run
    slot_count          BIGINT NOT NULL,  -- slots in the run
    leaker_pos_min      BIGINT NOT NULL,  -- lowest leaker sequence position held by the run
    leaker_pos_max      BIGINT NOT NULL,  -- highest leaker sequence position held by the run
    leaker_part         VARCHAR NOT NULL, -- prompt | generated | mixed
    first_read_at       TIMESTAMPTZ NOT NULL,  -- first read of the run
    last_read_at        TIMESTAMPTZ NOT NULL,  -- last read of the run
    first_write_at      TIMESTAMPTZ NOT NULL,  -- first write of the leaker's data read
    last_write_at       TIMESTAMPTZ NOT NULL,  -- last write of the leaker's data read
    kind                VARCHAR NOT NULL, -- stale | overwritten | prefix-mismatch
    cross_account       BOOLEAN,          -- NULL when an account is unknown
    confidence          VARCHAR NOT NULL  -- ledger | confirmed (after replay)
);

-- One row per (request, node, violation, other request, contiguous slot run).
CREATE TABLE IF NOT EXISTS violations (
    request_id       VARCHAR NOT NULL,  -- the request whose event broke ownership
    node             VARCHAR NOT NULL,  -- engine node
    slot_start       BIGINT NOT NULL,  -- first slot of the run
    slot_count       BIGINT NOT NULL,  -- slots in the run
    violation        VARCHAR NOT NULL,    -- write-after-free | write-unheld | double-allocation | read-unheld
    other_request_id VARCHAR,             -- the live holder involved, if any
    first_at         TIMESTAMPTZ NOT NULL,  -- first event of the run
    last_at          TIMESTAMPTZ NOT NULL  -- last event of the run
);

-- Per read request and node: what its reads saw, in slots (distinct slots).
CREATE TABLE IF NOT EXISTS read_stats (
    request_id          VARCHAR NOT NULL,  -- the reading request
    node                VARCHAR NOT NULL,  -- engine node
    reads               BIGINT NOT NULL,  -- read events
    own_slots           BIGINT NOT NULL,  -- slots holding its own data
    shared_verified     BIGINT NOT NULL,   -- prefix-cache hits whose hashes match
    shared_unverified   BIGINT NOT NULL,   -- prefix-cache hits with no hash to compare
    foreign_slots       BIGINT NOT NULL,  -- slots holding another request's data
    uninitialised_slots BIGINT NOT NULL  -- slots never written (not a leak)
);

-- Screening from the gateway log and node facts, for every request (ledger or not).
CREATE TABLE IF NOT EXISTS screening (
    request_id      VARCHAR NOT NULL,  -- the request
    account_id      VARCHAR NOT NULL,  -- its account
    prefill_node    VARCHAR,  -- serving prefill node
    decode_node     VARCHAR,  -- serving decode node
    reasons         VARCHAR[] NOT NULL,   -- e.g. over-pool, fast-ttft, engine-rejected, token-shortfall
    ttft_ms         DOUBLE,  -- time to first token
    expected_ttft_ms DOUBLE,  -- expected from the node's normal prefill rate
    ledger_covered  BOOLEAN NOT NULL,     -- a complete ledger covers its decode node then
    coverage        VARCHAR, -- ledger | ledger-hole | outside-ledger | no-ledger (its decode node)
    signals         VARCHAR[], -- stub signals that could be looked for: over-pool, fast-ttft,
                              -- cache-implausible, engine-log, token-counters
    answered        BOOLEAN   -- it may have decoded: a first token logged, or status 200 with
                              -- completion tokens billed or not logged (a log without first
                              -- tokens); what could not be looked for is counted over these
);

-- Possible (screened) exposure pairs: a suspect receiver that no complete ledger covers and
-- every request on the same decode node (or on one the log does not name) that could have
-- written the pages it read.
CREATE TABLE IF NOT EXISTS possible_exposures (
    receiver_request_id VARCHAR NOT NULL,  -- suspect receiver
    receiver_account_id VARCHAR NOT NULL,  -- its account
    leaker_request_id   VARCHAR NOT NULL,  -- a request on the same decode node before its end
    leaker_account_id   VARCHAR NOT NULL,  -- its account
    node                VARCHAR NOT NULL,  -- the decode node (the leaker's where the log names
                                           -- none for the receiver; '' where neither)
    cross_account       BOOLEAN NOT NULL,  -- the accounts differ
    basis               VARCHAR  -- concurrent | window | earlier: how near the suspect it ran;
                                 -- stub-cache-hit: the receiver's prefix-cache hit may have been
                                 -- served from blocks a stub suspect was handed and never wrote,
                                 -- and the leaker is one of that stub's
                                 -- (queries/analysis/possible_cache_hits.sql);
                                 -- stub-cache-hit-condensed: the same, where
                                 -- such pairs were too many to list: one pair
                                 -- stands for the receiver's read (or for the
                                 -- leaker's), the stub's page lists the rest
);

-- token-shortfall's windows (queries/analysis/token_shortfall.sql): per prefill node with SGLang
-- prefill batch counters, the runs of consecutive batch lines that no compared request's prefill
-- crosses the edge of, each with what the engine counted and what the gateway billed.
CREATE TABLE IF NOT EXISTS counter_windows (
    node            VARCHAR NOT NULL,    -- the prefill node
    window_no       BIGINT NOT NULL,     -- 1, 2, ... in time order per node
    first_ts        TIMESTAMPTZ NOT NULL,  -- time of its first batch line (node clock)
    last_ts         TIMESTAMPTZ NOT NULL,  -- time of its last batch line
    batch_lines     BIGINT NOT NULL,     -- prefill batch lines in it
    requests        BIGINT NOT NULL,     -- compared requests prefilled in it
    flagged_stubs   BIGINT NOT NULL,     -- of them, flagged as stubs by another reason
    basis           VARCHAR NOT NULL,    -- computed | total: see the query
    engine_tokens   BIGINT NOT NULL,     -- the engine's count (basis computed: new tokens; total: new + cached)
    billed_tokens   BIGINT NOT NULL,     -- the gateway's (computed: prompt less cached; total: prompt), a flagged stub as 1
    shortfall       BIGINT NOT NULL      -- billed_tokens - engine_tokens; above 0: token-shortfall
);

-- The requests token-shortfall compared, each with its window (counter_windows).
CREATE TABLE IF NOT EXISTS counter_window_requests (
    request_id VARCHAR NOT NULL,  -- the request
    node       VARCHAR NOT NULL,  -- its prefill node
    window_no  BIGINT NOT NULL    -- its window there (counter_windows.window_no)
);

-- Findings that positive evidence took off the lists, with the reason (never a missing source).
CREATE TABLE IF NOT EXISTS cleared_findings (
    receiver_request_id VARCHAR NOT NULL,  -- the screened or reconstructed receiver
    receiver_account_id VARCHAR,           -- its account
    leaker_request_id   VARCHAR,           -- the leaker cleared; NULL: the receiver as a whole
    leaker_account_id   VARCHAR,           -- its account
    node                VARCHAR,           -- the decode node
    evidence            VARCHAR NOT NULL,  -- ledger | replay | reconstruction
    reason              VARCHAR NOT NULL   -- what the evidence showed, in words
);

-- Stretches of a node's ledger that are known to be missing: requests active in them are
-- judged as on a node without a ledger.
CREATE TABLE IF NOT EXISTS ledger_holes (
    node        VARCHAR NOT NULL,  -- engine node
    kind        VARCHAR NOT NULL,  -- seq-gap | tap-dropped | tap-unfinished | tap-lost
    first_ts    TIMESTAMPTZ,       -- last event before the hole (node clock); NULL: unknown
    last_ts     TIMESTAMPTZ,       -- first event after it; NULL: open to the end
    events_lost BIGINT,            -- events missing, where known
    first_seq   BIGINT,            -- first seq missing, where known
    last_seq    BIGINT,            -- last seq missing, where known
    source      VARCHAR NOT NULL,  -- seq (the ledger's own numbering) or the tap file
    detail      VARCHAR NOT NULL   -- what was seen, in words
);

-- Per engine node: the evidence it was judged on.
CREATE TABLE IF NOT EXISTS node_evidence (
    node               VARCHAR NOT NULL,  -- engine node
    role               VARCHAR,           -- prefill | decode | unified, where known
    requests           BIGINT NOT NULL,   -- requests of the gateway log it served
    ledger_events      BIGINT NOT NULL,   -- events of its KV ledger (0: no ledger)
    ledger_first_ts    TIMESTAMPTZ,       -- its ledger's first event
    ledger_last_ts     TIMESTAMPTZ,       -- its ledger's last event
    holes              BIGINT NOT NULL,   -- ledger_holes rows of the node
    uncovered_requests BIGINT NOT NULL,   -- requests it decoded that no complete ledger covers
    reconstructed      BOOLEAN NOT NULL,  -- kvforensics reconstruct rebuilt its page trace
    evidence           VARCHAR NOT NULL,  -- ledger | ledger-with-holes | reconstructed | screening
    note               VARCHAR NOT NULL   -- what is missing and what would supply it, in words
);

-- One row per (side, request): side is receiving or leaking. Cross-account only.
CREATE TABLE IF NOT EXISTS affected_requests (
    side                VARCHAR NOT NULL,  -- receiving or leaking
    request_id          VARCHAR NOT NULL,  -- the request
    account_id          VARCHAR NOT NULL,  -- its account
    confidence          VARCHAR NOT NULL,  -- confirmed | ledger | reconstructed | possible
    tokens              BIGINT,            -- NULL for possible-only
    counterpart_requests BIGINT NOT NULL,  -- requests on the other side (counted, never named)
    first_affected_at   TIMESTAMPTZ,  -- first exposure read
    last_affected_at    TIMESTAMPTZ,  -- last exposure read
    support             DOUBLE        -- reconstructed: share of explored orders; else NULL
);

-- One row per (side, account). Cross-account only. tokens and requests as docs/DESIGN.md §6 defines.
CREATE TABLE IF NOT EXISTS affected_accounts (
    side                 VARCHAR NOT NULL,  -- receiving or leaking
    account_id           VARCHAR NOT NULL,  -- the account
    name                 VARCHAR,  -- from the accounts table
    contact_email        VARCHAR,  -- from the accounts table
    jurisdiction         VARCHAR,  -- from the accounts table
    confidence           VARCHAR NOT NULL,  -- best confidence of its requests
    requests             BIGINT NOT NULL,  -- distinct requests of the account on this side
    tokens               BIGINT,  -- token exposures (NULL: possible only)
    first_affected_at    TIMESTAMPTZ,  -- first exposure read
    last_affected_at     TIMESTAMPTZ,  -- last exposure read
    counterpart_accounts BIGINT NOT NULL,  -- other accounts involved (counted, never named)
    support              DOUBLE  -- reconstructed: best share of its requests; else NULL
);

-- Token exposures per (receiver request, node, leaker request): the distinct slots of that pair
-- on that node, whatever the kind or how often they were read.
CREATE TABLE IF NOT EXISTS exposure_tokens (
    receiver_request_id VARCHAR NOT NULL,     -- the request that read the data
    node                VARCHAR NOT NULL,     -- engine node
    leaker_request_id   VARCHAR NOT NULL,     -- the request whose data was read
    tokens              BIGINT NOT NULL,      -- distinct slots of the pair on the node
    first_read_at       TIMESTAMPTZ NOT NULL, -- first read
    last_read_at        TIMESTAMPTZ NOT NULL, -- last read
    receiver_account_id VARCHAR,              -- NULL when the request is not in the request log
    leaker_account_id   VARCHAR,              -- likewise
    cross_account       BOOLEAN               -- NULL when an account is unknown
);

-- Case databases analysed before reconstruction existed get the support column.
ALTER TABLE affected_requests ADD COLUMN IF NOT EXISTS support DOUBLE;
ALTER TABLE affected_accounts ADD COLUMN IF NOT EXISTS support DOUBLE;
-- Case databases analysed before evidence was graded get its columns.
ALTER TABLE screening ADD COLUMN IF NOT EXISTS coverage VARCHAR;
ALTER TABLE screening ADD COLUMN IF NOT EXISTS signals VARCHAR[];
ALTER TABLE screening ADD COLUMN IF NOT EXISTS answered BOOLEAN;
ALTER TABLE possible_exposures ADD COLUMN IF NOT EXISTS basis VARCHAR;
