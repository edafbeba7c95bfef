INSERT INTO engine_evidence (node, ts, kind, request_id, value, max_value, message, src_file,
                             src_line, bootstrap_room, slot_idx, position)
SELECT node, ts, kind, request_id, value, max_value, message, src_file,
       src_line, bootstrap_room, slot_idx, position
FROM logs_evidence_in
ORDER BY src_file, src_line, kind;
