-- OUT/timeline.jsonl in Timesketch's JSON Lines import format: one object per event with
-- message, datetime (ISO-8601 UTC with a Z), timestamp_desc, timestamp (microseconds since the
-- Unix epoch) and the attributes (null where a value does not apply). Sorted by time.
SELECT message, kvf_iso(event_at) AS datetime, timestamp_desc, epoch_us(event_at) AS timestamp,
       event_type, node, request_id, account_id, other_request_id, other_account_id,
       slot_start, slot_count, kind, confidence, detail
FROM timeline_lines
ORDER BY event_at, event_type, node, request_id, other_request_id, slot_start, kind, detail;
