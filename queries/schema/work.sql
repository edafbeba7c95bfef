-- The analysis' working tables, in the schema `work`, apart from the results: integer codes
-- and the compiled sweep's output, which the analysis SQL joins back into the result tables.
-- Each analysis run rewrites them.
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
    node                 VARCHAR,      -- as in requests
    response_sha256      VARCHAR,      -- as in requests
    src_file             VARCHAR,      -- as in requests
    src_row              BIGINT,       -- as in requests
    serving_prefill_node VARCHAR,      -- prefill_node, else node
    serving_decode_node  VARCHAR       -- decode_node, else node, else prefill_node
);

-- The sweep's foreign pieces: a slot range a read saw holding another request's write.
CREATE TABLE IF NOT EXISTS work.analysis_exposure_pieces (
    node          VARCHAR,  -- engine node
    read_key      BIGINT,   -- kv_events.input_order of the read
    write_key     BIGINT,   -- kv_events.input_order of the write it saw
    kind_code     TINYINT,  -- exposure kind (forensics/analysis/codes.py)
    slot_start    BIGINT,   -- first slot of the piece
    slot_end      BIGINT,   -- one past its last slot
    receiver_code INTEGER,  -- the reader's request code (work.analysis_request_codes)
    leaker_code   INTEGER,  -- the writer's request code
    run_no        BIGINT    -- the exposure run (per node) the piece coalesces into
);

-- The sweep's violation pieces: a slot range of an ownership violation.
CREATE TABLE IF NOT EXISTS work.analysis_violation_pieces (
    node           VARCHAR,  -- engine node
    event_key      BIGINT,   -- kv_events.input_order of the offending event
    violation_code TINYINT,  -- violation kind (forensics/analysis/codes.py)
    other_code     INTEGER,  -- request code of the other holder involved, if any
    slot_start     BIGINT,   -- first slot of the piece
    slot_end       BIGINT    -- one past its last slot
);

-- Per (node, reading request): reads, and the distinct slots its reads saw per category.
CREATE TABLE IF NOT EXISTS work.analysis_read_counts (
    node                VARCHAR,  -- engine node
    req_code            INTEGER,  -- the reading request's code
    reads               BIGINT,   -- read events
    own_slots           BIGINT,   -- slots holding its own data
    shared_verified     BIGINT,   -- prefix-cache hits whose hashes match
    shared_unverified   BIGINT,   -- prefix-cache hits with no hash to compare
    foreign_slots       BIGINT,   -- slots holding another request's data
    uninitialised_slots BIGINT    -- slots never written
);

-- The ledger events that the sweep's pieces name, with the columns the exposures and violations
-- queries use (for a ledger kept outside the database, returned by the partition tasks).
CREATE TABLE IF NOT EXISTS work.analysis_piece_events (
    event_key  BIGINT,     -- kv_events.input_order of the event
    ts         TIMESTAMPTZ, -- the event's time (node clock, UTC)
    request_id VARCHAR,    -- the event's request
    slot_start BIGINT,     -- first slot of the event's range
    pos_start  BIGINT,     -- sequence position held by slot_start
    source     VARCHAR     -- write source (prefill, decode, transfer)
);
