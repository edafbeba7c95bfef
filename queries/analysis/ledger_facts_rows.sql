-- A partition task's rows of {table} (temp.analysis_ledger_nodes or
-- temp.analysis_request_nodes), returned to the driver (forensics.analysis.partitions).
SELECT * FROM {table} ORDER BY ALL;
