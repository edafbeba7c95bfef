-- Whether the analysis' one-row-per-request table (work.analysis_requests) is there: the
-- scoping of screening's findings and the recount of the notification tables read it.
SELECT count(*) > 0 FROM duckdb_tables()
WHERE schema_name = 'work' AND table_name = 'analysis_requests' AND NOT temporary;
