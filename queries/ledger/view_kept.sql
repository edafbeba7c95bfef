-- The rows of a group of parts (queries/ledger/view_group.sql) that ingest kept: those not in
-- the quarantine. {rels}: the group's part names, in the order of its files. Each quarantined
-- row's part name is turned into the scan's file_index (its place in {rels}), so the list is
-- searched once per quarantined row: looked up for every row read, as a comparison with the
-- row's part name, DuckDB copied the list for every vector.
ANTI JOIN (
    SELECT CAST(list_position({rels}, q.file) - 1 AS BIGINT) AS dropped_index,
           q."row" - 1 AS dropped_row
    FROM quarantine q
    WHERE q.table_name = 'kv_events' AND list_contains({rels}, q.file)
) dropped ON dropped.dropped_index = part.file_index
         AND dropped.dropped_row = part.file_row_number
