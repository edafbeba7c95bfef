-- The deadline rules of this export (shipped rules.csv plus --rules), one row per jurisdiction
-- code; filled by notify_rules_insert.
CREATE OR REPLACE TEMP TABLE notify_rules (
    jurisdiction           VARCHAR NOT NULL,
    notify_within_hours    DOUBLE NOT NULL,
    authority_within_hours DOUBLE,
    basis                  VARCHAR NOT NULL
);
