-- One group of an external ledger's parts for the kv_events view (queries/ledger/view.sql):
-- parts of one node that hold the same columns with the same types, read in one scan. Each
-- column is typed by {ts}, {seq}, ... (a plain expression where the part holds it typed, the
-- text-tolerant kvf_* macros otherwise); a part's rank, name and node are constants looked up
-- by the scan's file_index, so no row is joined to ledger_files. {rank}: the first part's rank
-- (the others' follow on); {rels}: the parts' names in rank order (looked up only where a query
-- reads src_file).
-- {known}: `true` when none of the group's kept rows names a request missing from the request
-- log, else the check against requests; {kept}: empty when none of the group's rows is
-- quarantined, else the WHERE clause that leaves those out. {named}: empty, or the semi join
-- that keeps only the rows the analysis names, on the scan's own file_row_number for a part
-- read by itself (queries/ledger/view_named_rows.sql, which DuckDB applies before it decodes
-- the other columns), else on file_index and file_row_number (view_named_rows_group.sql).
-- {scan}: the scan of the parts in rank order (queries/ledger/view_parts.sql), or of the
-- task's local copy of them (queries/ledger/view_copy.sql), which gives each row the
-- file_index and file_row_number the scan of the parts gives it.
SELECT {ts} AS ts, {seq} AS seq, {node} AS node, {request_id} AS request_id, {op} AS op,
       {slot_start} AS slot_start, {slot_count} AS slot_count, {pos_start} AS pos_start,
       {source} AS source, {content_hash} AS content_hash,
       ({rank} + file_index::BIGINT) * 1099511627776 + file_row_number + 1 AS input_order,
       {known} AS request_known,
       {rels}[file_index::BIGINT + 1] AS src_file, file_row_number + 1 AS src_row
FROM {scan} AS part
{named}
{kept}
