-- The events of an external ledger whose keys the analysis names (temp.analysis_named_keys:
-- the events of a partition's pieces), typed as the kv_events view (queries/ledger/view.sql)
-- types them. {groups}: one SELECT (queries/ledger/view_group.sql, with its named rows) per
-- group of parts read alike, joined by UNION ALL.
CREATE OR REPLACE TEMP VIEW kv_named_events AS
{groups};
