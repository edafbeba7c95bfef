-- Whether a KV ledger is loaded into the case database (one kept outside it is known from its
-- metadata instead, without reading its files).
SELECT EXISTS (SELECT 1 FROM kv_events);
