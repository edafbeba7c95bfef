-- One node's events for the sweep, in no particular order: `rank` and `event_key` give the
-- total order (forensics.analysis.order sorts on them). Order: (seq, input_order) when every
-- event of the node has seq ($by_seq), else (ts, op rank, input_order) with op rank
-- the position in $ops (free=0 < alloc=1 < share=2 < write=3 < read=4; op rank < 8, so
-- ts * 8 + rank sorts both).
-- event_key is the event's input_order, unique in the case: the sweep's pieces name events by it.
-- The event covers slots [slot_start, slot_end).
WITH coded AS (
    SELECT e.*, CAST(list_position($ops, e.op) - 1
                     AS TINYINT) AS op_code
    FROM kv_events e
    WHERE e.node = $node
)
SELECT CASE WHEN $by_seq THEN c.seq ELSE epoch_us(c.ts) * 8 + c.op_code END AS rank,
       c.input_order AS event_key, c.op_code, r.req_code, c.slot_start,
       c.slot_start + c.slot_count AS slot_end,
       coalesce(h.hash_code, -1) AS hash_code
FROM coded c
JOIN work.analysis_request_codes r USING (request_id)
LEFT JOIN work.analysis_hash_codes h USING (content_hash);
