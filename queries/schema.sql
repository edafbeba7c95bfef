-- The case database: loaded inputs, their provenance, and the ingest bookkeeping.
-- Every timestamp is a UTC instant with microsecond precision (TIMESTAMPTZ).
-- Every loaded row keeps src_file (path relative to the case folder) and src_row (1-based data
-- row in that file; for CSV the header is not counted, for JSON Lines it is the line number).

CREATE TABLE IF NOT EXISTS requests (
    request_id        VARCHAR NOT NULL,
    account_id        VARCHAR NOT NULL,
    model             VARCHAR NOT NULL,
    received_at       TIMESTAMPTZ NOT NULL,
    first_token_at    TIMESTAMPTZ,
    completed_at      TIMESTAMPTZ,
    http_status       INTEGER NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT,
    prefill_node      VARCHAR,
    decode_node       VARCHAR,
    node              VARCHAR,
    response_sha256   VARCHAR,
    src_file          VARCHAR NOT NULL,
    src_row           BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS kv_events (
    ts            TIMESTAMPTZ NOT NULL,
    seq           BIGINT,
    node          VARCHAR NOT NULL,
    request_id    VARCHAR NOT NULL,
    op            VARCHAR NOT NULL,      -- alloc | share | write | read | free
    slot_start    BIGINT NOT NULL,
    slot_count    BIGINT NOT NULL,
    pos_start     BIGINT,                -- required for write, read, share
    source        VARCHAR,               -- write: prefill | decode | transfer
    content_hash  VARCHAR,
    input_order   BIGINT NOT NULL,       -- files sorted by path, rows in file order; unique
    request_known BOOLEAN NOT NULL,      -- the request is in the request log
    src_file      VARCHAR NOT NULL,
    src_row       BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS nodes (
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

CREATE TABLE IF NOT EXISTS accounts (
    account_id    VARCHAR NOT NULL,
    name          VARCHAR,
    contact_email VARCHAR,
    jurisdiction  VARCHAR,
    src_file      VARCHAR NOT NULL,
    src_row       BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS contents (
    request_id          VARCHAR NOT NULL,
    prompt_token_ids    BIGINT[],
    output_token_ids    BIGINT[],
    processed_token_ids BIGINT[],
    src_file            VARCHAR NOT NULL,
    src_row             BIGINT NOT NULL
);

-- A row that could not be loaded, with why. rows_read = rows_loaded + rows_quarantined per file.
CREATE TABLE IF NOT EXISTS quarantine (
    table_name VARCHAR NOT NULL,
    file       VARCHAR NOT NULL,
    "row"      BIGINT,
    "column"   VARCHAR,
    "value"    VARCHAR,
    reason     VARCHAR NOT NULL
);

-- A loaded row that deserves attention (e.g. a kv_event whose request is not in the request log).
CREATE TABLE IF NOT EXISTS ingest_warnings (
    table_name VARCHAR NOT NULL,
    file       VARCHAR NOT NULL,
    "row"      BIGINT,
    "column"   VARCHAR,
    "value"    VARCHAR,
    reason     VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS input_files (
    path             VARCHAR NOT NULL,   -- relative to the case folder
    table_name       VARCHAR NOT NULL,
    sha256           VARCHAR NOT NULL,
    bytes            BIGINT NOT NULL,
    rows_read        BIGINT NOT NULL,
    rows_loaded      BIGINT NOT NULL,
    rows_quarantined BIGINT NOT NULL
);

-- Key/value facts about runs: tool version, parameters, query checksums (JSON values).
CREATE TABLE IF NOT EXISTS case_meta (
    key   VARCHAR NOT NULL,
    value VARCHAR NOT NULL
);
