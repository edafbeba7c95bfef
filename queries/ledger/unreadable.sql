-- kv_events when the external ledger of the case cannot be read: a view with the columns of the
-- table that raises {message} (a quoted literal) when it is used, so that no stage mistakes an
-- unreadable ledger for an empty one, while stages that do not read it still run.
CREATE OR REPLACE TEMP VIEW kv_events AS
SELECT NULL::TIMESTAMP AS ts, NULL::BIGINT AS seq, NULL::VARCHAR AS node,
       NULL::VARCHAR AS request_id, NULL::VARCHAR AS op, NULL::BIGINT AS slot_start,
       NULL::BIGINT AS slot_count, NULL::BIGINT AS pos_start, NULL::VARCHAR AS source,
       NULL::VARCHAR AS content_hash, NULL::BIGINT AS input_order, NULL::BOOLEAN AS request_known,
       NULL::VARCHAR AS src_file, NULL::BIGINT AS src_row
FROM range(1)
WHERE error({message}) IS NULL;
