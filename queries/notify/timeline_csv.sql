-- OUT/timeline.csv in Timesketch's CSV import format: message, datetime (ISO-8601 UTC with a
-- Z), timestamp_desc, timestamp (microseconds since the Unix epoch), then attributes. Text cells
-- through kvf_csv_cell; slots stay integers; an empty cell is a NULL. Sorted by time.
SELECT kvf_csv_cell(message) AS message, kvf_iso(event_at) AS datetime,
       kvf_csv_cell(timestamp_desc) AS timestamp_desc, epoch_us(event_at) AS timestamp,
       kvf_csv_cell(event_type) AS event_type, kvf_csv_cell(node) AS node,
       kvf_csv_cell(request_id) AS request_id, kvf_csv_cell(account_id) AS account_id,
       kvf_csv_cell(other_request_id) AS other_request_id,
       kvf_csv_cell(other_account_id) AS other_account_id, slot_start, slot_count,
       kvf_csv_cell(kind) AS kind, kvf_csv_cell(confidence) AS confidence,
       kvf_csv_cell(detail) AS detail
FROM timeline_lines
ORDER BY event_at, event_type, node, request_id, other_request_id, slot_start, kind, detail;
