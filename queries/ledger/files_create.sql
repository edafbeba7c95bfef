-- The parts of a ledger kept outside the database (forensics.ledger): one row per Parquet
-- part, in path order; the events' input order is rank * 2^40 + row.
CREATE OR REPLACE TABLE ledger_files (
    url VARCHAR NOT NULL, rel VARCHAR NOT NULL, node VARCHAR NOT NULL, rank BIGINT NOT NULL
);
