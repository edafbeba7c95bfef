-- One part of an external ledger checked in one read: the rows that are quarantined or whose
-- request is not in the request log (both few), with why. {checks} is
-- queries/ingest/validate_kv_events.sql; on top of its checks, a part in folder node=NAME holds
-- the events of node NAME only (the analysis reads each partition alone, so a row of another
-- node there would be missed): such a row is quarantined.
CREATE OR REPLACE TEMP TABLE flagged AS
SELECT * FROM (
    SELECT src_row, request_id, request_known,
           CASE WHEN q IS NULL AND node <> $node
               THEN kvf_bad('node', node, 'row is in folder node=' || $node || ' but names node '
                            || node || ', move it to the folder of its node')
               ELSE q
           END AS q
    FROM ({checks})
)
WHERE q IS NOT NULL OR NOT request_known;
