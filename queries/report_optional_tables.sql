-- Tables of the replay stage, as the report reads them. Used only as empty stand-ins when a case
-- database lacks them (the stage did not run). The report and the exports create them as TEMP tables, never in the case
-- database, so a stage that runs later still writes its own real tables. The columns are the
-- ones the report reads; the stages that own these tables may have more.

CREATE TABLE IF NOT EXISTS replay_results (
    request_id          VARCHAR NOT NULL,
    verdict             VARCHAR NOT NULL,  -- confirmed | not-confirmed | inconclusive | ...
    reason              VARCHAR,
    delivered_sha256    VARCHAR,
    contaminated_sha256 VARCHAR,
    clean_sha256        VARCHAR,
    tokens              BIGINT,
    seconds             DOUBLE,
    tokens_per_s        DOUBLE,
    device              VARCHAR,
    model               VARCHAR
);
