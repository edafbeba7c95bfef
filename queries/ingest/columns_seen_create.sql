-- The columns each input file was found to have (forensics.case.columns), for the warnings
-- about those not in the contract.
CREATE OR REPLACE TEMP TABLE ingest_columns (
    table_name VARCHAR NOT NULL,
    file       VARCHAR NOT NULL,
    "column"   VARCHAR NOT NULL
);
