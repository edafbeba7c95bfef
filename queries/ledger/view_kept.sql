-- The rows of a group of parts (queries/ledger/view_group.sql) that ingest kept: those not in
-- the quarantine. {rels}: the group's part names, in the order of its files.
WHERE NOT EXISTS (
    SELECT 1 FROM quarantine q
    WHERE q.table_name = 'kv_events' AND q.file = {rels}[file_index::BIGINT + 1]
      AND q."row" = file_row_number + 1
)
