-- Tables written from the engines' own logs (a case's logs/ folder). A node that only the logs
-- name also gets its one row in `nodes` (schema.sql), from its last engine start.

-- One row per node and engine start found in its logs (src_file = the log, src_row = the line
-- of the pool size, or of the first value read).
CREATE TABLE IF NOT EXISTS node_starts (
    node           VARCHAR NOT NULL,
    role           VARCHAR,              -- prefill | decode | unified
    model          VARCHAR,
    engine         VARCHAR,
    engine_version VARCHAR,
    page_size      BIGINT,
    pool_slots     BIGINT,
    context_len    BIGINT,
    started_at     TIMESTAMPTZ,
    src_file       VARCHAR NOT NULL,
    src_row        BIGINT NOT NULL
);

-- Where the nodes file and an engine start in the logs disagree, one row per field.
CREATE TABLE IF NOT EXISTS node_disagreements (
    node       VARCHAR NOT NULL,
    field      VARCHAR NOT NULL,         -- pool_slots | context_len | page_size | role | engine
    in_nodes   VARCHAR,
    in_log     VARCHAR,
    nodes_file VARCHAR,
    nodes_row  BIGINT,
    log_file   VARCHAR,
    log_line   BIGINT
);

-- Every node value read from a log, with the line it came from. `run` numbers the engine starts
-- found in a node's logs (0 = first); `source` names the kind of line, or 'default'.
CREATE TABLE IF NOT EXISTS node_facts (
    node     VARCHAR NOT NULL,
    fact     VARCHAR NOT NULL,   -- pool_slots | context_len | page_size | role | model | engine | engine_version | fits
    value    VARCHAR,
    src_file VARCHAR,
    src_line BIGINT,
    run      INTEGER NOT NULL,
    source   VARCHAR NOT NULL
);

-- Per-request evidence the engines logged. value / max_value per kind:
--   exceeds-max-tokens, input-too-long: input tokens / the limit
--   kv-checksum-mismatch: checksum got / checksum expected
--   kv-canary-violation: stored token / expected token (slot_idx, position set)
--   deferred-release-timeout: timeout in seconds (rounded) / NULL
CREATE TABLE IF NOT EXISTS engine_evidence (
    node           VARCHAR NOT NULL,
    ts             TIMESTAMPTZ,          -- as written in the log (node-local clock), NULL if none
    kind           VARCHAR NOT NULL,   -- exceeds-max-tokens | input-too-long | kv-checksum-mismatch | kv-canary-violation | deferred-release-timeout
    request_id     VARCHAR,
    value          BIGINT,
    max_value      BIGINT,
    message        VARCHAR NOT NULL,
    src_file       VARCHAR NOT NULL,
    src_line       BIGINT NOT NULL,
    bootstrap_room BIGINT,
    slot_idx       BIGINT,
    position       BIGINT
);

-- One row per log file read: lines = parsed + truncated + ignored.
CREATE TABLE IF NOT EXISTS log_files (
    path      VARCHAR NOT NULL,
    node      VARCHAR NOT NULL,
    engine    VARCHAR,
    sha256    VARCHAR NOT NULL,
    bytes     BIGINT NOT NULL,
    lines     BIGINT NOT NULL,
    parsed    BIGINT NOT NULL,
    truncated BIGINT NOT NULL,
    ignored   BIGINT NOT NULL
);
