-- The requests being explained, as a TEMP table every explain query reads ($ids: their ids).
CREATE OR REPLACE TEMP TABLE explain_ids AS
SELECT DISTINCT unnest(CAST($ids AS VARCHAR[])) AS request_id;
