-- Empty stand-ins for the tables the log adapters write, when a case database has none.
CREATE TEMP TABLE IF NOT EXISTS engine_evidence (
    node       VARCHAR,
    ts         TIMESTAMPTZ,
    kind       VARCHAR,
    request_id VARCHAR,
    value      BIGINT,
    max_value  BIGINT,
    message    VARCHAR,
    src_file   VARCHAR,
    src_line   BIGINT
);

-- Likewise for the engine starts and the log files.
CREATE TEMP TABLE IF NOT EXISTS node_starts (
    node        VARCHAR,
    engine      VARCHAR,
    page_size   BIGINT,
    pool_slots  BIGINT,
    started_at  TIMESTAMPTZ,
    src_file    VARCHAR,
    src_row     BIGINT
);
CREATE TEMP TABLE IF NOT EXISTS log_files (
    path VARCHAR
);
CREATE TEMP TABLE IF NOT EXISTS node_facts (
    node     VARCHAR,
    fact     VARCHAR,
    value    VARCHAR,
    src_file VARCHAR,
    src_line BIGINT,
    run      INTEGER,
    source   VARCHAR
);
