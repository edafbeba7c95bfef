-- Whether the case holds anything to analyse: a request of the gateway log, or an event of the
-- KV ledger loaded into the case database (a ledger kept outside it is checked apart).
SELECT EXISTS (SELECT 1 FROM requests) OR EXISTS (SELECT 1 FROM kv_events);
