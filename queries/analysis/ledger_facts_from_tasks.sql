-- The driver's temp.analysis_ledger_nodes and temp.analysis_request_nodes from the partition
-- tasks' rows (registered as _ledger_nodes and _request_nodes): what the loaded ledger's pass
-- (queries/analysis/ledger_nodes.sql, request_nodes.sql) would give.
CREATE OR REPLACE TEMP TABLE analysis_ledger_nodes AS SELECT * FROM _ledger_nodes;

CREATE OR REPLACE TEMP TABLE analysis_request_nodes AS SELECT * FROM _request_nodes;
