-- The quarantine rows of the checked part $file (forensics.ledger.external).
SELECT 'kv_events' AS table_name, $file AS file, src_row AS "row", q."column" AS "column",
       q."value" AS "value", q.reason AS reason
FROM flagged WHERE q IS NOT NULL ORDER BY src_row;
