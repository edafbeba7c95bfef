-- kv_events where the events cannot be read from here: {view} is `TEMP VIEW kv_events` when the
-- external ledger of the case cannot be read, or `VIEW main.kv_events` in the case database
-- itself, whose ledger is kept outside it (kvforensics shadows that one with its TEMP view over
-- the parts). A view with the columns of the table that raises {message} (a quoted literal) when
-- it is used, so that no stage and no other reader (the DuckDB CLI, a notebook) mistakes a
-- ledger it cannot read for an empty one, while what does not read it still works.
CREATE OR REPLACE {view} AS
SELECT NULL::TIMESTAMP AS ts, NULL::BIGINT AS seq, NULL::VARCHAR AS node,
       NULL::VARCHAR AS request_id, NULL::VARCHAR AS op, NULL::BIGINT AS slot_start,
       NULL::BIGINT AS slot_count, NULL::BIGINT AS pos_start, NULL::VARCHAR AS source,
       NULL::VARCHAR AS content_hash, NULL::BIGINT AS input_order, NULL::BOOLEAN AS request_known,
       NULL::VARCHAR AS src_file, NULL::BIGINT AS src_row
FROM range(1)
WHERE error({message}) IS NULL;
