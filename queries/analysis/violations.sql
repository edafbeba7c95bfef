-- violations: the sweep's violation pieces coalesced into maximal slot runs per
-- (request, node, violation, other request), with the first and last event time. violation:
-- the code's name in $violations (forensics.analysis.codes).
DELETE FROM violations;

INSERT INTO violations BY NAME
WITH piece AS (
    SELECT e.request_id, p.node, p.slot_start, p.slot_end, e.ts,
           ($violations)[p.violation_code + 1] AS violation,
           o.request_id AS other_request_id
    FROM temp.analysis_violation_pieces p
    JOIN temp.analysis_piece_events e ON e.event_key = p.event_key
    LEFT JOIN work.analysis_request_codes o ON o.req_code = p.other_code
), reach AS (
    SELECT *, max(slot_end) OVER (
        PARTITION BY request_id, node, violation, other_request_id
        ORDER BY slot_start, slot_end ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS reach_before
    FROM piece
), island AS (
    SELECT *, sum(CASE WHEN reach_before IS NULL OR slot_start > reach_before THEN 1 ELSE 0 END)
        OVER (PARTITION BY request_id, node, violation, other_request_id
              ORDER BY slot_start, slot_end ROWS UNBOUNDED PRECEDING) AS run_no
    FROM reach
)
SELECT request_id, node, violation, other_request_id,
       min(slot_start) AS slot_start, max(slot_end) - min(slot_start) AS slot_count,
       min(ts) AS first_at, max(ts) AS last_at
FROM island
GROUP BY request_id, node, violation, other_request_id, run_no
ORDER BY node, request_id, violation, other_request_id NULLS FIRST, slot_start;
