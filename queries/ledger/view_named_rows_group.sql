-- The rows of a group of parts read in one scan (queries/ledger/view_group.sql: parts of fewer
-- than 2^17 events; a larger part is read by itself, view_named_rows.sql) whose keys are in
-- temp.analysis_named_keys: a key is rank * 2^40 + row (queries/ingest/validate_kv_events.sql),
-- here turned into the scan's file_index (the rank less {rank}, the group's first; its parts'
-- ranks run on to {last}) and file_row_number (row - 1).
SEMI JOIN (
    SELECT k.event_key // 1099511627776 - {rank} AS named_index,
           k.event_key % 1099511627776 - 1 AS named_row
    FROM temp.analysis_named_keys k
    WHERE k.event_key BETWEEN {rank} * 1099511627776 AND ({last} + 1) * 1099511627776 - 1
) named ON named.named_index = part.file_index AND named.named_row = part.file_row_number
