-- The analysis input: every kv_event of every node in its total order, with int codes for the
-- compiled sweep. Order per node: (seq, input_order) when every event of the node has seq,
-- else (ts, op rank, input_order) with op rank free=0 < alloc=1 < share=2 < write=3 < read=4.
-- ord is 0-based and dense per node; req_code and hash_code are dense over the whole case.
-- Only the columns later queries use are kept (the table is as long as the ledger).
CREATE OR REPLACE TABLE analysis_request_codes AS
SELECT request_id, CAST(row_number() OVER (ORDER BY request_id) - 1 AS BIGINT) AS req_code
FROM (SELECT DISTINCT request_id FROM kv_events);

CREATE OR REPLACE TABLE analysis_events AS
WITH node_mode AS (
    SELECT node, count(seq) = count(*) AS by_seq FROM kv_events GROUP BY node
), hashes AS (
    SELECT content_hash, CAST(row_number() OVER (ORDER BY content_hash) - 1 AS BIGINT) AS hash_code
    FROM (SELECT DISTINCT content_hash FROM kv_events WHERE content_hash IS NOT NULL)
), coded AS (
    SELECT e.*,
           CAST(list_position(['free', 'alloc', 'share', 'write', 'read'], e.op) - 1 AS BIGINT)
               AS op_code,
           m.by_seq
    FROM kv_events e JOIN node_mode m USING (node)
    WHERE e.op IN ('free', 'alloc', 'share', 'write', 'read') AND e.slot_count > 0
)
SELECT c.node,
       CAST(row_number() OVER (
           PARTITION BY c.node
           ORDER BY CASE WHEN c.by_seq THEN c.seq ELSE epoch_us(c.ts) END,
                    CASE WHEN c.by_seq THEN 0 ELSE c.op_code END,
                    c.input_order
       ) - 1 AS BIGINT) AS ord,
       c.ts, c.request_id, r.req_code, c.op, c.op_code, c.slot_start, c.slot_count,
       c.pos_start, c.source, coalesce(h.hash_code, -1) AS hash_code
FROM coded c
JOIN analysis_request_codes r USING (request_id)
LEFT JOIN hashes h USING (content_hash);
