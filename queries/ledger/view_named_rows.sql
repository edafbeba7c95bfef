-- The rows of one part read by itself (queries/ledger/view_group.sql) whose keys are in
-- temp.analysis_named_keys: a key is rank * 2^40 + row (queries/ingest/validate_kv_events.sql),
-- here the part's rank {rank} and the scan's file_row_number (row - 1). The join is on the
-- row number alone, so that DuckDB filters the scan by the named rows before it reads the
-- other columns: only the rows named are decoded, where a join on (file_index, row) over a
-- scan of several parts decodes every row of every column first. The keys are a range of
-- the named keys, which are stored in key order (queries/analysis/named_keys.sql).
SEMI JOIN (
    SELECT k.event_key % 1099511627776 - 1 AS named_row
    FROM temp.analysis_named_keys k
    WHERE k.event_key BETWEEN {rank} * 1099511627776 AND ({rank} + 1) * 1099511627776 - 1
) named ON named.named_row = part.file_row_number
