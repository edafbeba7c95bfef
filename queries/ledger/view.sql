-- kv_events of a case whose ledger is kept outside the database (forensics.ledger.view): the
-- parts read in place and typed as ingest types them, without the quarantined rows, as a
-- temporary view that stands in for the (empty) table. {view}: kv_events, or kv_named_events
-- for only the events whose keys are in temp.analysis_named_keys (each group with its named
-- rows; a large part then a group of its own: forensics.ledger.view.named_groups). {groups}:
-- one SELECT (queries/ledger/view_group.sql) per group of parts read alike, joined by UNION
-- ALL.
CREATE OR REPLACE TEMP VIEW {view} AS
{groups};
