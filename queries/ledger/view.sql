-- kv_events of a case whose ledger is kept outside the database (forensics.ledger): the parts
-- read in place and typed as ingest types them, without the quarantined rows, as a temporary
-- view that stands in for the (empty) table. {files}: the parts as a list of quoted paths or
-- URLs; {projection}: the columns of the contract; {assume_utc}: true or false.
CREATE OR REPLACE TEMP VIEW kv_events AS
WITH raw AS (
    SELECT filename AS _url, file_row_number + 1 AS src_row, {projection}
    FROM read_parquet({files}, filename = true, file_row_number = true, union_by_name = true,
                      hive_partitioning = false)
)
SELECT kvf_ts(r.ts, {assume_utc}) AS ts, kvf_int(r.seq) AS seq, f.node AS node,
       kvf_str(r.request_id) AS request_id, r.op::VARCHAR AS op,
       kvf_int(r.slot_start) AS slot_start, kvf_int(r.slot_count) AS slot_count,
       kvf_int(r.pos_start) AS pos_start, kvf_str(r.source) AS source,
       kvf_str(r.content_hash) AS content_hash,
       f.rank * 1099511627776 + r.src_row AS input_order,
       kvf_str(r.request_id) IN (SELECT request_id FROM requests) AS request_known,
       f.rel AS src_file, r.src_row
FROM raw r
JOIN ledger_files f ON f.url = r._url
WHERE NOT EXISTS (
    SELECT 1 FROM quarantine q
    WHERE q.table_name = 'kv_events' AND q.file = f.rel AND q."row" = r.src_row
);
