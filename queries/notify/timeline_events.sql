-- The incident's timeline as a TEMP table, one line per event: exposure runs, the leaker's
-- writes behind each (at its first write of the data read), ownership violations, screened
-- suspects, arrival, first token and completion of every request on the lists (the gateway's
-- times), replay's verdicts (one per request and run, placed at the response it judged: its
-- first token, else its arrival; a run's own wall-clock time would change the file each run),
-- engine log evidence and engine starts (each start once: a
-- start logged by the engine and also given in the nodes file at the same time is one event,
-- with the values the engine logged). event_type says which kind of event a line is. Typed: event_at
-- TIMESTAMPTZ, slots BIGINT, NULL where a value does not apply. timeline_csv and
-- timeline_jsonl write it in Timesketch's import formats.
CREATE OR REPLACE TEMP TABLE timeline_lines AS
WITH events AS (
    SELECT first_read_at AS event_at, 'exposure' AS event_type,
           'KV exposure read' AS timestamp_desc, node, receiver_request_id AS request_id,
           receiver_account_id AS account_id, leaker_request_id AS other_request_id,
           leaker_account_id AS other_account_id, slot_start, slot_count, kind, confidence,
           CASE WHEN cross_account THEN 'cross-account'
                WHEN NOT cross_account THEN 'same-account' ELSE 'account unknown' END AS detail
    FROM exposures
    UNION
    SELECT first_write_at, 'leaker-write', 'KV written by the leaker', node, leaker_request_id,
           leaker_account_id, receiver_request_id, receiver_account_id, slot_start, slot_count,
           kind, confidence,
           CASE WHEN cross_account THEN 'cross-account'
                WHEN NOT cross_account THEN 'same-account' ELSE 'account unknown' END
    FROM exposures
    UNION
    SELECT moment, event_type, timestamp_desc, node, request_id, account_id, NULL, NULL, NULL, NULL,
           NULL, NULL, detail
    FROM (
        SELECT r.request_id, r.account_id, l.sides AS detail,
               coalesce(r.prefill_node, r.node) AS first_node,
               coalesce(r.decode_node, r.node, r.prefill_node) AS last_node,
               r.received_at, r.first_token_at, r.completed_at,
               r.prompt_tokens, r.completion_tokens, r.http_status
        FROM requests r
        JOIN (SELECT request_id, string_agg(DISTINCT side, ',' ORDER BY side) AS sides
              FROM affected_requests GROUP BY request_id) l USING (request_id)
        QUALIFY row_number() OVER (PARTITION BY r.request_id ORDER BY r.src_file, r.src_row) = 1
    ) listed,
    LATERAL (VALUES (received_at, 'request-received', 'Request received', first_node),
                    (first_token_at, 'first-token', 'First token sent', last_node),
                    (completed_at, 'request-completed', 'Response completed', last_node))
        AS t(moment, event_type, timestamp_desc, node)
    WHERE moment IS NOT NULL
    UNION
    SELECT coalesce(r.first_token_at, r.received_at), 'replay', 'Replay verdict on the response',
           x.decode_node, x.request_id, r.account_id, NULL, NULL, NULL, NULL, x.verdict,
           coalesce(x.basis, x.verdict), coalesce(x.run_id, 'run unknown')
    FROM replay_results x
    JOIN (SELECT * FROM requests
          QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY src_file, src_row) = 1) r
      USING (request_id)
    UNION
    SELECT first_at, 'violation', 'KV ownership violation', node, request_id, NULL,
           other_request_id, NULL, slot_start, slot_count, violation, 'ledger', NULL
    FROM violations
    UNION
    SELECT r.received_at, 'suspect', 'Suspect request received',
           coalesce(s.decode_node, s.prefill_node), s.request_id, s.account_id, NULL, NULL,
           NULL, NULL, array_to_string(list_sort(s.reasons), ','), 'possible',
           CASE WHEN s.ledger_covered THEN 'ledger covers it' ELSE 'no ledger' END
    FROM screening s JOIN requests r USING (request_id)
    WHERE len(s.reasons) > 0
    UNION
    SELECT ts, 'engine-log', 'Engine log evidence', node, request_id, NULL, NULL, NULL, NULL,
           NULL, kind, NULL, message
    FROM engine_evidence WHERE ts IS NOT NULL
    UNION
    SELECT started_at, 'engine-start', 'Engine started', node, NULL, NULL, NULL, NULL, NULL,
           NULL, role, NULL,
           'pool_slots=' || coalesce(CAST(pool_slots AS VARCHAR), '?') ||
           ' context_len=' || coalesce(CAST(context_len AS VARCHAR), '?')
    FROM (SELECT node, started_at, role, pool_slots, context_len FROM node_starts
          UNION ALL
          SELECT n.node, n.started_at, n.role, n.pool_slots, n.context_len FROM nodes n
          WHERE NOT EXISTS (SELECT 1 FROM node_starts s
                            WHERE s.node = n.node AND s.started_at = n.started_at))
    WHERE started_at IS NOT NULL
)
SELECT CAST(event_at AS TIMESTAMPTZ) AS event_at, event_type, timestamp_desc, node, request_id,
       account_id, other_request_id, other_account_id, CAST(slot_start AS BIGINT) AS slot_start,
       CAST(slot_count AS BIGINT) AS slot_count, kind, confidence, detail,
       CASE event_type
           WHEN 'exposure' THEN
               request_id || ' read KV of ' || other_request_id || ' on ' || node
               || ' slots ' || slot_start || '-' || (slot_start + slot_count - 1)
               || ' (' || kind || ', ' || detail || ')'
           WHEN 'violation' THEN
               request_id || ' ' || kind || ' on ' || node
               || ' slots ' || slot_start || '-' || (slot_start + slot_count - 1)
               || coalesce(', held by ' || other_request_id, '')
           WHEN 'suspect' THEN
               request_id || ' screened as a possible receiver'
               || coalesce(' on ' || node, '') || ' (' || kind || ')'
           WHEN 'leaker-write' THEN
               request_id || ' wrote KV on ' || node || ' slots ' || slot_start || '-'
               || (slot_start + slot_count - 1) || ' later read by ' || other_request_id
               || ' (' || kind || ', ' || detail || ')'
           WHEN 'request-received' THEN
               request_id || ' received' || coalesce(' by ' || node, '')
               || ' (on the lists: ' || detail || ')'
           WHEN 'first-token' THEN
               request_id || ' sent its first token' || coalesce(' from ' || node, '')
           WHEN 'request-completed' THEN
               request_id || ' completed' || coalesce(' on ' || node, '')
           WHEN 'replay' THEN
               'replay of ' || request_id || ': ' || kind
               || CASE WHEN confidence <> kind THEN ' (' || confidence || ')' ELSE '' END
               || ', ' || detail
           WHEN 'engine-log' THEN node || ': ' || kind || coalesce(': ' || detail, '')
           ELSE node || ' started (' || coalesce(kind, 'role unknown') || ', ' || detail || ')'
       END AS message
FROM events;
