-- The scan of a partition task's local copy of a group of parts (queries/ledger/copy_group.sql),
-- for queries/ledger/view_group.sql: the rows as the parts hold them, each with the file_index
-- and file_row_number the scan of the parts gives it. {copy}: the copy's path as a literal.
(SELECT part_index::BIGINT AS file_index, part_row AS file_row_number,
        * EXCLUDE (part_index, part_row)
 FROM read_parquet({copy}, hive_partitioning = false))
