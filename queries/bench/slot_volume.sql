-- Rows a per-slot explosion of the ledger would make (every event's range, slot by slot).
SELECT sum(slot_count) FROM kv_events;
