-- The view an earlier external ingest left as the case database's own kv_events, before a new
-- ingest makes it the table again (and fills it, or replaces it by the view once more).
DROP VIEW main.kv_events;
