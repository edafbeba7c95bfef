-- The own copies of a partition check (forensics.ledger.external) of what ingest/validate_kv_events.sql
-- reads besides the part: the node pools and the request ids (registered as _nodes and
-- _request_ids); temporary tables, so they stand in for those of the case.
CREATE OR REPLACE TEMP TABLE nodes AS SELECT node, pool_slots FROM _nodes;
CREATE OR REPLACE TEMP TABLE requests AS SELECT request_id FROM _request_ids;
