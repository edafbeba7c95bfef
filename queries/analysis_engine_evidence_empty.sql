-- An empty stand-in for engine_evidence (written by the log adapters) when a case has none.
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
