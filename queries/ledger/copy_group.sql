-- A partition task's local copy of a group of many small parts (forensics.ledger.copies): each
-- row's columns of the contract ({columns}: those the group's parts hold) as its part holds
-- them, with its part's place in the group (part_index, the scan's file_index) and its row in
-- the part (part_row, file_row_number), in that order. {files}: the parts' paths or URLs as
-- quoted literals, in rank order; {copy}: the copy's path. Every pass
-- over a part costs DuckDB a fixed time to open it, whatever it holds (about 0.2 to 0.6 ms);
-- the task reads its partition four times, so a node of 20,000 parts of a few hundred rows
-- spent most of its analysis opening them. The copy reads them once.
COPY (
    SELECT file_index::INTEGER AS part_index, file_row_number AS part_row, {columns}
    FROM read_parquet({files}, file_row_number = true, union_by_name = false,
                      hive_partitioning = false)
) TO {copy} (FORMAT parquet, COMPRESSION snappy);
