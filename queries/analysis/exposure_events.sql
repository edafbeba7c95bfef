-- The columns an exposure run needs of the events one node's exposure pieces name
-- (forensics.analysis.runfacts), for the keys registered as _exposure_keys ($lo and $hi: their
-- lowest and highest, so that a loaded ledger reads only that stretch of its rows), from {events}:
-- kv_events, or a partition task's view of the events its pieces name. source_code: 0 prompt
-- (prefill, transfer), 1 generated (decode), 2 another or no source (judged by position).
SELECT e.input_order AS event_key, epoch_us(e.ts) AS ts_us,
       e.pos_start - e.slot_start AS pos_offset,
       CAST(CASE WHEN e.source IN ('prefill', 'transfer') THEN 0
                 WHEN e.source = 'decode' THEN 1 ELSE 2 END AS TINYINT) AS source_code
FROM {events} e
SEMI JOIN _exposure_keys k ON k.event_key = e.input_order
WHERE e.input_order BETWEEN $lo AND $hi;
