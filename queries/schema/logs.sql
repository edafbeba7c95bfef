-- Tables written from the engines' own logs (a case's logs/ folder). A node that only the logs
-- name also gets its one row in `nodes` (schema/case.sql), from its last engine start.

-- One row per node and engine start found in its logs (src_file = the log, src_row = the line
-- of the pool size, or of the first value read).
CREATE TABLE IF NOT EXISTS node_starts (
    node           VARCHAR NOT NULL,  -- engine instance
    role           VARCHAR,              -- prefill | decode | unified
    model          VARCHAR,  -- model served
    engine         VARCHAR,  -- engine name (sglang, vllm)
    engine_version VARCHAR,  -- engine version
    page_size      BIGINT,  -- KV page size in tokens
    pool_slots     BIGINT,  -- KV pool size in token slots
    context_len    BIGINT,  -- advertised context length in tokens
    started_at     TIMESTAMPTZ,  -- when this start was logged (node clock)
    src_file       VARCHAR NOT NULL,  -- the log file
    src_row        BIGINT NOT NULL  -- line of the pool size, or of the first value read
);

-- Where the nodes file and an engine start in the logs disagree, one row per field.
CREATE TABLE IF NOT EXISTS node_disagreements (
    node       VARCHAR NOT NULL,  -- engine instance
    field      VARCHAR NOT NULL,         -- pool_slots | context_len | page_size | role | engine
    in_nodes   VARCHAR,  -- value in the nodes file
    in_log     VARCHAR,  -- value in the log
    nodes_file VARCHAR,  -- the nodes file
    nodes_row  BIGINT,  -- its row
    log_file   VARCHAR,  -- the log file
    log_line   BIGINT  -- the log line
);

-- Every node value read from a log, with the line it came from. `run` numbers the engine starts
-- found in a node's logs (0 = first); `source` names the kind of line, or 'default'.
CREATE TABLE IF NOT EXISTS node_facts (
    node     VARCHAR NOT NULL,  -- engine instance
    fact     VARCHAR NOT NULL,   -- pool_slots | context_len | page_size | role | model | engine | engine_version | fits | max_num_seqs | max_num_batched_tokens | chunked_prefill | prefix_caching | device | data_parallel_size | kv_cache_groups (vLLM, where logged) | decode_radix_cache | reserved_decode_tokens (SGLang, where logged)
    value    VARCHAR,  -- the value as read
    src_file VARCHAR,  -- log file (NULL for a derived fact)
    src_line BIGINT,  -- line in that file
    run      INTEGER NOT NULL,  -- engine start (0 = first in the node's logs)
    source   VARCHAR NOT NULL  -- kind of line it came from, or 'default'
);

-- Per-request evidence the engines logged. value / max_value per kind:
--   exceeds-max-tokens, input-too-long: input tokens / the limit
--   kv-checksum-mismatch: checksum got / checksum expected
--   kv-canary-violation: stored token / expected token (slot_idx, position set)
--   deferred-release-timeout: timeout in seconds (rounded) / NULL
CREATE TABLE IF NOT EXISTS engine_evidence (
    node           VARCHAR NOT NULL,  -- engine instance
    ts             TIMESTAMPTZ,          -- as written in the log (node-local clock), NULL if none
    kind           VARCHAR NOT NULL,   -- exceeds-max-tokens | input-too-long | kv-checksum-mismatch | kv-canary-violation | deferred-release-timeout
    request_id     VARCHAR,  -- the request it names, if any
    value          BIGINT,  -- see the table comment
    max_value      BIGINT,  -- see the table comment
    message        VARCHAR NOT NULL,  -- the log line's message
    src_file       VARCHAR NOT NULL,  -- log file
    src_line       BIGINT NOT NULL,  -- line in that file
    bootstrap_room BIGINT,  -- disaggregation bootstrap room, if logged
    slot_idx       BIGINT,  -- KV slot, if logged
    position       BIGINT  -- sequence position, if logged
);

-- The engines' own token counters, one row per counter line (docs/engines.md, "Token
-- counters"). Kind sglang.prefill-batch, a `Prefill batch` line: new_seqs, new_tokens (prompt
-- tokens computed) and cached_tokens (taken from the radix cache) of that one batch. Kind
-- vllm.stats, a v1 periodic stats line (every 10 s): prompt_throughput (prompt tokens computed
-- since the previous line, prefix-cache hits excluded, per second, rounded to 0.1),
-- generation_throughput, running, waiting, prefix_hit_rate (percent, over the last 1000
-- requests looked up). Per node and DP rank, only the lines of the lowest other ranks that log
-- a prefill batch are kept (SGLang logs a DP group's batches from its attention TP rank 0).
CREATE TABLE IF NOT EXISTS engine_counters (
    node                  VARCHAR NOT NULL,  -- engine instance
    dp_rank               BIGINT NOT NULL,   -- DP rank (SGLang) or engine index (vLLM), 0 if none
    ts                    TIMESTAMPTZ,       -- the line's time (node clock); NULL without a date (vLLM writes no year)
    stamp                 VARCHAR NOT NULL,  -- the time as the log wrote it
    kind                  VARCHAR NOT NULL,  -- sglang.prefill-batch | vllm.stats
    new_seqs              BIGINT,  -- sglang: requests in the batch (a chunk counts its request again)
    new_tokens            BIGINT,  -- sglang: prompt tokens the batch computed
    cached_tokens         BIGINT,  -- sglang: prompt tokens the batch took from the radix cache
    prompt_throughput     DOUBLE,  -- vllm: computed prompt tokens per second since the last line
    generation_throughput DOUBLE,  -- vllm: generated tokens per second since the last line
    running               BIGINT,  -- vllm: requests running
    waiting               BIGINT,  -- vllm: requests waiting
    prefix_hit_rate       DOUBLE,  -- vllm: prefix-cache hit rate in percent (recent 1000 requests)
    src_file              VARCHAR NOT NULL,  -- log file
    src_line              BIGINT NOT NULL  -- line in that file
);

-- One row per log file read: lines = parsed + truncated + ignored.
CREATE TABLE IF NOT EXISTS log_files (
    path      VARCHAR NOT NULL,  -- relative to the case folder
    node      VARCHAR NOT NULL,  -- engine instance the file belongs to
    engine    VARCHAR,  -- sglang or vllm
    sha256    VARCHAR NOT NULL,  -- SHA-256 of the file's bytes
    bytes     BIGINT NOT NULL,  -- file size
    lines     BIGINT NOT NULL,  -- lines read = parsed + truncated + ignored
    parsed    BIGINT NOT NULL,  -- lines that gave a value
    truncated BIGINT NOT NULL,  -- lines cut short
    ignored   BIGINT NOT NULL  -- lines without anything to read
);

-- The tap's reports on what it could not record (forensics/ingest/tapfiles.py), one row each:
-- a batch it dropped, a status it left, a ledger part it did not finish.
CREATE TABLE IF NOT EXISTS tap_reports (
    file      VARCHAR NOT NULL,  -- the report, or the unfinished part, relative to the case
    line      BIGINT,            -- line of a gaps file (status: 1; unfinished part: NULL)
    kind      VARCHAR NOT NULL,  -- dropped | dropped-contents | status | unfinished
    node      VARCHAR,           -- the node the tap recorded
    run       BIGINT,            -- the recording process's start second (its seq >> 32)
    ts        TIMESTAMPTZ,       -- dropped: when the batch was dropped (tap host clock)
    first_seq BIGINT,            -- dropped: first seq lost
    last_seq  BIGINT,            -- dropped: last seq lost
    dropped   BIGINT,            -- dropped: events in the batch; status: events dropped in all
    recorded  BIGINT,            -- status: events recorded
    written   BIGINT             -- status: events written
);
