-- Tables written by the analysis stage (kvforensics analyze). Each stage drops and rewrites its
-- own tables, so any stage can be re-run alone.

-- One row per (receiver request, leaker request, node, kind, contiguous slot run).
CREATE TABLE IF NOT EXISTS exposures (
    receiver_request_id VARCHAR NOT NULL,
    receiver_account_id VARCHAR,          -- NULL when the request is not in the request log
    leaker_request_id   VARCHAR NOT NULL,
    leaker_account_id   VARCHAR,
    node                VARCHAR NOT NULL,
    slot_start          BIGINT NOT NULL,
    slot_count          BIGINT NOT NULL,
    leaker_pos_min      BIGINT NOT NULL,  -- leaker's sequence positions held by the run
    leaker_pos_max      BIGINT NOT NULL,
    leaker_part         VARCHAR NOT NULL, -- prompt | generated | mixed
    first_read_at       TIMESTAMP NOT NULL,
    last_read_at        TIMESTAMP NOT NULL,
    first_write_at      TIMESTAMP NOT NULL,
    last_write_at       TIMESTAMP NOT NULL,
    kind                VARCHAR NOT NULL, -- stale | overwritten | prefix-mismatch
    cross_account       BOOLEAN,          -- NULL when an account is unknown
    confidence          VARCHAR NOT NULL  -- ledger | confirmed (after replay)
);

-- One row per (request, node, violation, other request, contiguous slot run).
CREATE TABLE IF NOT EXISTS violations (
    request_id       VARCHAR NOT NULL,
    node             VARCHAR NOT NULL,
    slot_start       BIGINT NOT NULL,
    slot_count       BIGINT NOT NULL,
    violation        VARCHAR NOT NULL,    -- write-after-free | write-unheld | double-allocation | read-unheld
    other_request_id VARCHAR,             -- the live holder involved, if any
    first_at         TIMESTAMP NOT NULL,
    last_at          TIMESTAMP NOT NULL
);

-- Per read request and node: what its reads saw, in slots (distinct slots).
CREATE TABLE IF NOT EXISTS read_stats (
    request_id          VARCHAR NOT NULL,
    node                VARCHAR NOT NULL,
    reads               BIGINT NOT NULL,
    own_slots           BIGINT NOT NULL,
    shared_verified     BIGINT NOT NULL,   -- prefix-cache hits whose hashes match
    shared_unverified   BIGINT NOT NULL,   -- prefix-cache hits with no hash to compare
    foreign_slots       BIGINT NOT NULL,
    uninitialised_slots BIGINT NOT NULL
);

-- Screening from the gateway log and node facts, for every request (ledger or not).
CREATE TABLE IF NOT EXISTS screening (
    request_id      VARCHAR NOT NULL,
    account_id      VARCHAR NOT NULL,
    prefill_node    VARCHAR,
    decode_node     VARCHAR,
    reasons         VARCHAR[] NOT NULL,   -- e.g. over-pool, fast-ttft, engine-rejected
    ttft_ms         DOUBLE,
    expected_ttft_ms DOUBLE,
    ledger_covered  BOOLEAN NOT NULL      -- a ledger covers its decode node at that time
);

-- Possible (screened) exposure pairs: suspect receiver and every request in the window before
-- it on the same decode node.
CREATE TABLE IF NOT EXISTS possible_exposures (
    receiver_request_id VARCHAR NOT NULL,
    receiver_account_id VARCHAR NOT NULL,
    leaker_request_id   VARCHAR NOT NULL,
    leaker_account_id   VARCHAR NOT NULL,
    node                VARCHAR NOT NULL,
    cross_account       BOOLEAN NOT NULL
);

-- One row per (side, request): side is receiving or leaking. Cross-account only.
CREATE TABLE IF NOT EXISTS affected_requests (
    side                VARCHAR NOT NULL,
    request_id          VARCHAR NOT NULL,
    account_id          VARCHAR NOT NULL,
    confidence          VARCHAR NOT NULL,  -- confirmed | ledger | reconstructed | possible
    tokens              BIGINT,            -- NULL for possible-only
    counterpart_requests BIGINT NOT NULL,
    first_affected_at   TIMESTAMP,
    last_affected_at    TIMESTAMP,
    support             DOUBLE             -- reconstructed: share of explored orders; else NULL
);

-- One row per (side, account). Cross-account only. tokens and requests as DESIGN §6 defines.
CREATE TABLE IF NOT EXISTS affected_accounts (
    side                 VARCHAR NOT NULL,
    account_id           VARCHAR NOT NULL,
    name                 VARCHAR,
    contact_email        VARCHAR,
    jurisdiction         VARCHAR,
    confidence           VARCHAR NOT NULL,
    requests             BIGINT NOT NULL,
    tokens               BIGINT,
    first_affected_at    TIMESTAMP,
    last_affected_at     TIMESTAMP,
    counterpart_accounts BIGINT NOT NULL,
    support              DOUBLE             -- reconstructed: best share of its requests; else NULL
);

-- Case databases analysed before reconstruction existed get the support column.
ALTER TABLE affected_requests ADD COLUMN IF NOT EXISTS support DOUBLE;
ALTER TABLE affected_accounts ADD COLUMN IF NOT EXISTS support DOUBLE;
