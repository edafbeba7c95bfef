-- Parts of an external ledger checked in one read (queries/ingest/stage_parquet_batch.sql). {checks} is
-- queries/ingest/validate_kv_events.sql, run with a file_rank of 0, so that its input_order is
-- the row's event key (part rank * 2^40 + row); on top of its checks, a part in folder
-- node=NAME holds the events of node NAME only (the analysis reads each partition alone, so a
-- row of another node there would be missed): such a row is quarantined. {folder}: the row's
-- folder's node, a literal when the parts read are one node's, else looked up by the row's part
-- (small partitions are checked together: forensics.ledger.check).
-- The read is grouped so that it gives three things at once, per part (part_rank). Each row
-- that is quarantined is a group of its own, with why (src_row: its row in its part); the kept
-- rows whose request is not in the request log make a group per request (unknown_request),
-- which counts them and keeps the first one's key; every other row falls in one group. And the
-- groups of kept rows (q IS NULL) sum to the part's facts, which spare the analysis a pass over
-- the part (queries/ledger/part_facts.sql).
CREATE OR REPLACE TEMP TABLE checked AS
SELECT event_key // 1099511627776 AS part_rank,
       CASE WHEN q IS NOT NULL THEN event_key % 1099511627776 END AS src_row,
       CASE WHEN q IS NULL AND NOT request_known THEN request_id END AS unknown_request,
       any_value(q) AS q,
       count(*) AS events, count(seq) AS with_seq,
       max(slot_start + slot_count) AS slot_end_max,
       min(event_key) AS key_min, max(event_key) AS key_max,
       count(*) FILTER (WHERE op = 'read') AS reads,
       count(*) FILTER (WHERE op IN ('alloc', 'share')) AS acquisitions,
       min(ts) AS first_ts, max(ts) AS last_ts
FROM (
    SELECT input_order AS event_key, request_id, request_known, seq, slot_start, slot_count,
           op, ts,
           CASE WHEN q IS NULL AND node <> {folder}
               THEN kvf_bad('node', node, 'row is in folder node=' || {folder} || ' but names node '
                            || node || ', move it to the folder of its node')
               ELSE q
           END AS q
    FROM ({checks})
)
GROUP BY 1, 2, 3;
