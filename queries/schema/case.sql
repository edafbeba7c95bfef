-- The case database: loaded inputs, their provenance, and the ingest bookkeeping.
-- Every timestamp is a UTC instant with microsecond precision (TIMESTAMPTZ).
-- Every loaded row keeps src_file (path relative to the case folder) and src_row (1-based data
-- row in that file; for CSV the header is not counted, for JSON Lines it is the line number).

-- The gateway request log, one row per request (as loaded; ids may repeat, the analysis takes the first).
CREATE TABLE IF NOT EXISTS requests (
    request_id        VARCHAR NOT NULL,  -- unique request id; the same id the engine uses
    account_id        VARCHAR NOT NULL,  -- the customer
    model             VARCHAR NOT NULL,  -- model named by the gateway
    received_at       TIMESTAMPTZ NOT NULL,  -- when the gateway received the request
    first_token_at    TIMESTAMPTZ,  -- when the first output token was sent
    completed_at      TIMESTAMPTZ,  -- when the response completed
    http_status       INTEGER NOT NULL,  -- HTTP status answered
    prompt_tokens     BIGINT NOT NULL,  -- prompt tokens as billed
    completion_tokens BIGINT,  -- output tokens as billed
    prefill_node      VARCHAR,  -- engine instance that ran the prefill
    decode_node       VARCHAR,  -- engine instance that ran the decode
    node              VARCHAR,  -- the engine instance, for non-disaggregated serving
    response_sha256   VARCHAR,  -- SHA-256 of the delivered output token ids, ','-joined decimal
    src_file          VARCHAR NOT NULL,  -- input file, relative to the case folder
    src_row           BIGINT NOT NULL,  -- data row in that file (JSON Lines: line number)
    cached_tokens     BIGINT,  -- prompt tokens the engine reported as served from its prefix
                               -- cache (usage.prompt_tokens_details.cached_tokens)
    temperature       DOUBLE,  -- sampling temperature of the request (0: greedy); replay scores
                               -- the delivered output at it
    top_p             DOUBLE,  -- nucleus sampling: the probability mass sampled from (1: all)
    top_k             BIGINT,  -- sampling from the k most likely tokens (0 or less: all)
    seed              BIGINT  -- the sampling seed the request asked for
);

-- The engines' KV ledgers, one row per page/slot event.
CREATE TABLE IF NOT EXISTS kv_events (
    ts            TIMESTAMPTZ NOT NULL,  -- event time on the node's own clock
    seq           BIGINT,  -- per-node order; orders the node's events when every event has it
    node          VARCHAR NOT NULL,  -- engine instance
    request_id    VARCHAR NOT NULL,  -- request that owns the event
    op            VARCHAR NOT NULL,      -- alloc | share | write | read | free
    slot_start    BIGINT NOT NULL,  -- first KV token slot of the range
    slot_count    BIGINT NOT NULL,  -- number of slots in the range
    pos_start     BIGINT,                -- required for write, read, share
    source        VARCHAR,               -- write: prefill | decode | transfer
    content_hash  VARCHAR,               -- identity of the token prefix the range holds (write, share)
    input_order   BIGINT NOT NULL,       -- files sorted by path, rows in file order; unique
    request_known BOOLEAN NOT NULL,      -- the request is in the request log
    src_file      VARCHAR NOT NULL,  -- input file, relative to the case folder
    src_row       BIGINT NOT NULL  -- data row in that file (JSON Lines: line number)
);

-- One row per engine node: the nodes file's row, else its last engine start in the logs.
CREATE TABLE IF NOT EXISTS nodes (
    node           VARCHAR NOT NULL,  -- engine instance (one row per node)
    role           VARCHAR,              -- prefill | decode | unified
    model          VARCHAR,  -- model served
    engine         VARCHAR,  -- engine name (sglang, vllm)
    engine_version VARCHAR,  -- engine version
    page_size      BIGINT,  -- KV page size in tokens
    pool_slots     BIGINT,  -- KV pool size in token slots
    context_len    BIGINT,  -- advertised context length in tokens
    started_at     TIMESTAMPTZ,  -- when the engine started
    src_file       VARCHAR NOT NULL,  -- nodes file, or the log it was read from
    src_row        BIGINT NOT NULL  -- row in that file (log: line of the pool size)
);

-- The customer directory.
CREATE TABLE IF NOT EXISTS accounts (
    account_id    VARCHAR NOT NULL,  -- the customer (unique)
    name          VARCHAR,  -- customer name
    contact_email VARCHAR,  -- where notices go
    jurisdiction  VARCHAR,  -- e.g. EU, UK, US-CA; picks the deadline rule
    src_file      VARCHAR NOT NULL,  -- input file, relative to the case folder
    src_row       BIGINT NOT NULL  -- data row in that file
);

-- Token ids per request, kept for replay.
CREATE TABLE IF NOT EXISTS contents (
    request_id          VARCHAR NOT NULL,  -- the request (unique)
    prompt_token_ids    BIGINT[],  -- prompt token ids
    output_token_ids    BIGINT[],  -- delivered output token ids
    processed_token_ids BIGINT[],  -- what the engine computed instead of the prompt (e.g. a 1-token stub)
    src_file            VARCHAR NOT NULL,  -- input file, relative to the case folder
    src_row             BIGINT NOT NULL  -- data row in that file
);

-- A row that could not be loaded, with why. rows_read = rows_loaded + rows_quarantined per file.
CREATE TABLE IF NOT EXISTS quarantine (
    table_name VARCHAR NOT NULL,  -- input table the row was meant for
    file       VARCHAR NOT NULL,  -- input file
    "row"      BIGINT,  -- data row (JSON Lines: line number)
    "column"   VARCHAR,  -- the column at fault, if one
    "value"    VARCHAR,  -- the raw value
    reason     VARCHAR NOT NULL  -- why, and how to fix it
);

-- A loaded row that deserves attention (e.g. a kv_event whose request is not in the request log).
CREATE TABLE IF NOT EXISTS ingest_warnings (
    table_name VARCHAR NOT NULL,  -- input table
    file       VARCHAR NOT NULL,  -- input file
    "row"      BIGINT,  -- data row
    "column"   VARCHAR,  -- the column concerned
    "value"    VARCHAR,  -- the value
    reason     VARCHAR NOT NULL  -- what deserves attention
);

-- One row per input file read by ingest, with its checksum and row counts.
CREATE TABLE IF NOT EXISTS input_files (
    path             VARCHAR NOT NULL,   -- relative to the case folder
    table_name       VARCHAR NOT NULL,  -- the input table it holds
    sha256           VARCHAR NOT NULL,  -- SHA-256 of the file's bytes
    bytes            BIGINT NOT NULL,  -- file size
    rows_read        BIGINT NOT NULL,  -- rows read = loaded + quarantined
    rows_loaded      BIGINT NOT NULL,  -- rows loaded
    rows_quarantined BIGINT NOT NULL  -- rows quarantined
);

-- Key/value facts about runs: tool version, parameters, query checksums (JSON values).
CREATE TABLE IF NOT EXISTS case_meta (
    key   VARCHAR NOT NULL,  -- fact name
    value VARCHAR NOT NULL  -- JSON value
);

-- Case databases made before the request log could carry cached_tokens get the column.
ALTER TABLE requests ADD COLUMN IF NOT EXISTS cached_tokens BIGINT;
-- Case databases made before the request log could carry sampling settings get the columns.
ALTER TABLE requests ADD COLUMN IF NOT EXISTS temperature DOUBLE;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS top_p DOUBLE;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS top_k BIGINT;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS seed BIGINT;
