-- One part of an external ledger checked in one read. {checks} is
-- queries/ingest/validate_kv_events.sql; on top of its checks, a part in folder node=NAME holds
-- the events of node NAME only (the analysis reads each partition alone, so a row of another
-- node there would be missed): such a row is quarantined.
-- The read is grouped so that it gives two things at once. Each row that is quarantined, or
-- whose request is not in the request log (both few), is a group of its own, with why; every
-- other row falls in the one group whose src_row is NULL. And the groups of kept rows (q IS
-- NULL) sum to the part's facts, which spare the analysis a pass over the part
-- (queries/ledger/part_facts.sql).
CREATE OR REPLACE TEMP TABLE checked AS
SELECT CASE WHEN q IS NOT NULL OR NOT request_known THEN src_row END AS src_row,
       any_value(request_id) AS request_id, bool_and(request_known) AS request_known,
       any_value(q) AS q,
       count(*) AS events, count(seq) AS with_seq,
       max(slot_start + slot_count) AS slot_end_max,
       min(input_order) AS key_min, max(input_order) AS key_max,
       count(*) FILTER (WHERE op = 'read') AS reads,
       count(*) FILTER (WHERE op IN ('alloc', 'share')) AS acquisitions,
       min(ts) AS first_ts, max(ts) AS last_ts
FROM (
    SELECT src_row, request_id, request_known, seq, slot_start, slot_count, input_order, op, ts,
           CASE WHEN q IS NULL AND node <> $node
               THEN kvf_bad('node', node, 'row is in folder node=' || $node || ' but names node '
                            || node || ', move it to the folder of its node')
               ELSE q
           END AS q
    FROM ({checks})
)
GROUP BY 1;

-- The rows of the checked part that are quarantined or name a request not in the request log.
CREATE OR REPLACE TEMP VIEW flagged AS
SELECT src_row, request_id, request_known, q FROM checked WHERE src_row IS NOT NULL;
