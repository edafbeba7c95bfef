-- The columns an exposure run needs of the events one node's exposure pieces name
-- (forensics.analysis.runfacts), for the keys registered as _exposure_keys ($lo and $hi: their
-- lowest and highest, so that a loaded ledger reads only that stretch of its rows), from
-- kv_events. The columns are those of queries/analysis/named_event_facts.sql.
SELECT e.input_order AS event_key, coalesce(epoch_us(e.ts), 0) AS ts_us,
       coalesce(e.pos_start - e.slot_start, 0) AS pos_offset,
       CAST(CASE WHEN e.source IN ('prefill', 'transfer') THEN 0
                 WHEN e.source = 'decode' THEN 1 ELSE 2 END AS TINYINT) AS source_code,
       CAST(e.ts IS NOT NULL AND e.pos_start IS NOT NULL AS TINYINT) AS complete
FROM kv_events e
SEMI JOIN _exposure_keys k ON k.event_key = e.input_order
WHERE e.input_order BETWEEN $lo AND $hi;
