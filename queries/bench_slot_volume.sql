-- Rows a per-slot explosion of the ledger's writes and reads would make.
SELECT sum(slot_count) FROM kv_events WHERE op IN ('write', 'read');
