-- One line per event for OUT/timeline.csv (Timesketch CSV import): exposure runs, ownership
-- violations, screened suspects, engine log evidence and engine starts. All values as text.
SELECT first_read_at AS event_at, 'exposure' AS event_type, 'KV exposure read' AS timestamp_desc,
       node, receiver_request_id AS request_id, receiver_account_id AS account_id,
       leaker_request_id AS other_request_id, leaker_account_id AS other_account_id,
       slot_start, slot_count, kind, confidence,
       CASE WHEN cross_account THEN 'cross-account' WHEN NOT cross_account THEN 'same-account'
            ELSE 'account unknown' END AS detail
FROM exposures
UNION ALL
SELECT first_at, 'violation', 'KV ownership violation', node, request_id, NULL,
       other_request_id, NULL, slot_start, slot_count, violation, 'ledger', NULL
FROM violations
UNION ALL
SELECT r.received_at, 'suspect', 'Suspect request received', coalesce(s.decode_node, s.prefill_node),
       s.request_id, s.account_id, NULL, NULL, NULL, NULL, array_to_string(list_sort(s.reasons), ','),
       'possible', CASE WHEN s.ledger_covered THEN 'ledger covers it' ELSE 'no ledger' END
FROM screening s JOIN requests r USING (request_id)
WHERE len(s.reasons) > 0
UNION ALL
SELECT ts, 'engine-log', 'Engine log evidence', node, request_id, NULL, NULL, NULL, NULL, NULL,
       kind, NULL, message
FROM engine_evidence WHERE ts IS NOT NULL
UNION ALL
SELECT started_at, 'engine-start', 'Engine started', node, NULL, NULL, NULL, NULL, NULL, NULL,
       role, NULL,
       'pool_slots=' || coalesce(CAST(pool_slots AS VARCHAR), '?') ||
       ' context_len=' || coalesce(CAST(context_len AS VARCHAR), '?')
FROM nodes WHERE started_at IS NOT NULL
ORDER BY event_at, event_type, node, request_id, other_request_id, slot_start, kind;
