-- The parts of a ledger kept outside the database (forensics.ledger): one row per Parquet
-- part, in path order; the events' input order is rank * 2^40 + row. The other columns are what
-- the part's check found its kept rows to be (queries/ledger/part_facts.sql), so that the
-- analysis need not read the part for them (queries/analysis/ledger_nodes_recorded.sql).
CREATE OR REPLACE TABLE ledger_files (
    url VARCHAR NOT NULL, rel VARCHAR NOT NULL, node VARCHAR NOT NULL, rank BIGINT NOT NULL,
    events BIGINT NOT NULL, with_seq BIGINT NOT NULL, slot_end_max BIGINT,
    key_min BIGINT, key_max BIGINT, reads BIGINT NOT NULL, acquisitions BIGINT NOT NULL,
    first_ts TIMESTAMPTZ, last_ts TIMESTAMPTZ
);
