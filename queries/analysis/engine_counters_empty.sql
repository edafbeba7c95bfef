-- An empty stand-in for the engines' token counters, when a case database has none.
CREATE TEMP TABLE IF NOT EXISTS engine_counters (
    node          VARCHAR,
    ts            TIMESTAMPTZ,
    kind          VARCHAR,
    new_tokens    BIGINT,
    cached_tokens BIGINT,
    src_file      VARCHAR,
    src_line      BIGINT
);
