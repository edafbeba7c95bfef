-- kv_events of a case whose ledger is kept outside the database (forensics.ledger.view): the
-- parts read in place and typed as ingest types them, without the quarantined rows, as a
-- temporary view that stands in for the (empty) table. {groups}: one SELECT
-- (queries/ledger/view_group.sql) per group of parts read alike, joined by UNION ALL.
CREATE OR REPLACE TEMP VIEW kv_events AS
{groups};
