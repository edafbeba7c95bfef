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
    basis               VARCHAR,  -- of a confirmation: reproduced (greedy decoding from the KV
                                  -- it read gives the delivered output) | evidence (the
                                  -- delivered output is far more likely under that KV)
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
    model_matches       BOOLEAN,           -- the run's served_model is the request log's model
    -- The evidence, with the delivered token ids kept (both replays score them teacher-forced):
    evidence_bits       DOUBLE,   -- sum over delivered tokens of log2 p under the KV it read
                                  -- minus log2 p under its own prompt (log-likelihood ratio)
    scored_tokens       BIGINT,   -- delivered tokens scored
    tokens_for_contamination BIGINT,  -- of them, more likely under the KV it read
    tokens_for_clean    BIGINT,   -- of them, more likely under its own prompt
    largest_token_bits  DOUBLE,   -- the largest one token's share of evidence_bits (>= 0)
    smallest_token_bits DOUBLE,   -- the most negative one (<= 0)
    contaminated_bits_per_token DOUBLE,  -- mean log2 p of a delivered token, KV it read
    sampling_bits_per_token DOUBLE,  -- mean log2 p of a token sampled there at the temperature
    plausibility_z      DOUBLE,   -- (observed - sampling's expected) log2 p, in standard
                                  -- deviations: far below 0, the output is implausible there
    score_temperature   DOUBLE    -- the temperature scored at (the request's, else 1)
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
-- Case databases written before verdicts by evidence gain its columns (NULL for older runs).
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS basis VARCHAR;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS evidence_bits DOUBLE;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS scored_tokens BIGINT;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS tokens_for_contamination BIGINT;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS tokens_for_clean BIGINT;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS largest_token_bits DOUBLE;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS smallest_token_bits DOUBLE;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS contaminated_bits_per_token DOUBLE;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS sampling_bits_per_token DOUBLE;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS plausibility_z DOUBLE;
ALTER TABLE replay_results ADD COLUMN IF NOT EXISTS score_temperature DOUBLE;
