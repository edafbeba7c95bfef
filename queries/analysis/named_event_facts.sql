-- The columns an exposure run needs (forensics.analysis.runfacts) of every event a partition
-- task's pieces name, read once from the view of only those events (kv_named_events,
-- queries/ledger/view.sql): the events of violation pieces are among them, and are left out
-- by their keys afterwards. source_code: 0 prompt (prefill, transfer), 1 generated (decode),
-- 2 another or no source (judged by position). complete: 1 where the event has a time stamp
-- and a position (the columns hold 0 where it has not).
SELECT input_order AS event_key, coalesce(epoch_us(ts), 0) AS ts_us,
       coalesce(pos_start - slot_start, 0) AS pos_offset,
       CAST(CASE WHEN source IN ('prefill', 'transfer') THEN 0
                 WHEN source = 'decode' THEN 1 ELSE 2 END AS TINYINT) AS source_code,
       CAST(ts IS NOT NULL AND pos_start IS NOT NULL AS TINYINT) AS complete
FROM kv_named_events;
