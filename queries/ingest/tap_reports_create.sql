-- The tap's reports on what it could not record (forensics/ingest/tapfiles.py), one row each.
CREATE OR REPLACE TABLE tap_reports (
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
