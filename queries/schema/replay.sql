-- Tables written by replay (kvforensics replay, or the replay stage of investigate).
-- Every run is kept: its verdicts never replace an earlier run's. seconds, tokens_per_s and the
-- runs' times are measured wall-clock figures: the only non-deterministic columns.

-- One row per replay run: the model it used, where and when.
CREATE TABLE IF NOT EXISTS replay_runs (
    run_id          VARCHAR NOT NULL,  -- run-0001, run-0002, ... in the order runs were made
    started_at      TIMESTAMPTZ,
    finished_at     TIMESTAMPTZ,
    model           VARCHAR,           -- as given to --model
    model_path      VARCHAR,           -- the folder loaded ('' for the built-in test model)
    served_model    VARCHAR,           -- the request log's name for this model
    config_sha256   VARCHAR,           -- of config.json (of the test model's config)
    weight_files    VARCHAR[],         -- weight file names, sorted
    weight_sha256   VARCHAR[],         -- SHA-256 of each weight file, same order
    device          VARCHAR,
    dtype           VARCHAR,
    tool_version    VARCHAR,
    suspects        BIGINT
);

-- One row per suspect receiver replayed.
CREATE TABLE IF NOT EXISTS replay_results (
    request_id          VARCHAR NOT NULL,  -- the suspect receiver
    verdict             VARCHAR NOT NULL,  -- confirmed | not-reproduced | cannot-replay
    reason              VARCHAR NOT NULL,  -- why, in words (also for confirmed)
    delivered_sha256    VARCHAR,           -- of the delivered output token ids (','-joined)
    contaminated_sha256 VARCHAR,           -- of the replay from the KV the decode really read
    clean_sha256        VARCHAR,           -- of the replay from the request's own prompt alone
                                           -- (up to its first token unlike the delivered one)
    tokens              BIGINT,            -- token positions run through the model, both replays
    seconds             DOUBLE,  -- wall-clock time of both replays
    tokens_per_s        DOUBLE,  -- tokens / seconds
    device              VARCHAR,  -- cpu or cuda
    model               VARCHAR,  -- the model replayed with
    decode_node         VARCHAR,           -- the node whose first decode read was rebuilt
    output_tokens       BIGINT,            -- tokens decoded per replay (the logged output length)
    foreign_slots       BIGINT,            -- the suspect's positions holding another request's KV
    uninitialised_slots BIGINT,            -- positions never written (replayed as zeros)
    uninitialised_share DOUBLE,            -- first decode step's attention on never-written slots
    run_id              VARCHAR,           -- the replay_runs row
    model_matches       BOOLEAN            -- the run's served_model is the request log's model
);

-- One row per (suspect, foreign writer whose KV the suspect's first decode read).
CREATE TABLE IF NOT EXISTS replay_attention (
    request_id         VARCHAR NOT NULL,   -- the suspect
    leaker_request_id  VARCHAR NOT NULL,   -- the foreign writer
    share              DOUBLE,             -- first decode step's attention on the leaker's slots,
                                           -- averaged over layers and heads
    slots              BIGINT NOT NULL,    -- the suspect's positions holding the leaker's KV
    run_id             VARCHAR             -- the replay_runs row
);

-- Case databases written before runs were kept gain the run columns.
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS run_id VARCHAR;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS model_matches BOOLEAN;
ALTER TABLE replay_attention ADD COLUMN IF NOT EXISTS run_id VARCHAR;
-- Never-written positions were once named unwritten_*; such a case database gains the
-- uninitialised_* columns (the analysis' name for the same thing), filled by later runs.
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS uninitialised_slots BIGINT;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS uninitialised_share DOUBLE;
