-- Tables written by replay (kvforensics replay, or the replay stage of investigate).
-- seconds and tokens_per_s are measured wall-clock figures: the only non-deterministic columns.

-- One row per suspect receiver replayed.
CREATE TABLE IF NOT EXISTS replay_results (
    request_id          VARCHAR NOT NULL,  -- the suspect receiver
    verdict             VARCHAR NOT NULL,  -- confirmed | not-reproduced | cannot-replay
    reason              VARCHAR NOT NULL,  -- why, in words (also for confirmed)
    delivered_sha256    VARCHAR,           -- of the delivered output token ids (','-joined)
    contaminated_sha256 VARCHAR,           -- of the replay from the KV the decode really read
    clean_sha256        VARCHAR,           -- of the replay from the request's own prompt alone
    tokens              BIGINT,            -- token positions run through the model, both replays
    seconds             DOUBLE,  -- wall-clock time of both replays
    tokens_per_s        DOUBLE,  -- tokens / seconds
    device              VARCHAR,  -- cpu or cuda
    model               VARCHAR,  -- the model replayed with
    decode_node         VARCHAR,           -- the node whose first decode read was rebuilt
    output_tokens       BIGINT,            -- tokens decoded per replay (the logged output length)
    foreign_slots       BIGINT,            -- the suspect's positions holding another request's KV
    unwritten_slots     BIGINT,            -- positions never written (replayed as zeros)
    unwritten_share     DOUBLE             -- first decode step's attention on never-written slots
);

-- One row per (suspect, foreign writer whose KV the suspect's first decode read).
CREATE TABLE IF NOT EXISTS replay_attention (
    request_id         VARCHAR NOT NULL,   -- the suspect
    leaker_request_id  VARCHAR NOT NULL,   -- the foreign writer
    share              DOUBLE,             -- first decode step's attention on the leaker's slots,
                                           -- averaged over layers and heads
    slots              BIGINT NOT NULL     -- the suspect's positions holding the leaker's KV
);
