-- node_evidence: per engine node (serving a request of the gateway log, holding ledger events
-- or named in the nodes table), the evidence it was judged on (docs/DESIGN.md §4, "Say what
-- evidence there is"):
--   ledger             a ledger with no known hole that covers every request the node decoded;
--   ledger-with-holes  a ledger with holes (ledger_holes) or requests it does not reach (among
--                      those answered with a first token: one refused before any engine ran
--                      it has nothing to record): those requests are judged as without a ledger
--                      (screening, reconstruction);
--   reconstructed      no ledger; kvforensics reconstruct rebuilt the page trace;
--   screening          no ledger and no reconstruction: the gateway log and the node facts only.
-- note says what is missing and what would supply it.
DELETE FROM node_evidence;

INSERT INTO node_evidence BY NAME
WITH served AS (
    SELECT serving_decode_node AS node, request_id FROM work.analysis_requests
    WHERE serving_decode_node IS NOT NULL
    UNION
    SELECT serving_prefill_node, request_id FROM work.analysis_requests
    WHERE serving_prefill_node IS NOT NULL
), all_nodes AS (
    SELECT node FROM served
    UNION SELECT node FROM temp.analysis_ledger_nodes
    UNION SELECT node FROM nodes
), roles AS (
    SELECT node, arg_min(role, (src_file, src_row)) AS role FROM nodes
    WHERE role IS NOT NULL GROUP BY node
), counts AS (
    SELECT node, count(DISTINCT request_id) AS n FROM served GROUP BY node
), uncovered AS (
    SELECT decode_node AS node, count(*) AS n FROM screening
    WHERE NOT ledger_covered AND decode_node IS NOT NULL AND answered
    GROUP BY decode_node
), holes AS (
    SELECT node, count(*) AS n, sum(events_lost) AS lost FROM ledger_holes GROUP BY node
), numbering AS (
    SELECT node FROM temp.analysis_seq_runs
    GROUP BY node
    HAVING bool_or(hi - lo + 1 > 2 * events)
        OR (bool_or(hi - lo + 1 > events)
            AND node NOT IN (SELECT node FROM ledger_holes WHERE source = 'seq'))
), blind AS (
    SELECT decode_node AS node, count(*) AS n FROM screening
    WHERE NOT ledger_covered AND decode_node IS NOT NULL AND answered
      AND len(coalesce(signals, [])) = 0
    GROUP BY decode_node
), blind_fitting AS (
    SELECT decode_node AS node, count(*) AS n FROM screening
    WHERE NOT ledger_covered AND decode_node IS NOT NULL AND answered
      AND NOT list_has_any(coalesce(signals, []),
                           ['fast-ttft', 'cache-implausible', 'token-counters'])
    GROUP BY decode_node
), counted AS (
    SELECT decode_node AS node, count(*) AS n FROM screening
    WHERE NOT ledger_covered AND decode_node IS NOT NULL
      AND list_contains(coalesce(signals, []), 'token-counters')
    GROUP BY decode_node
), skipped AS (
    SELECT node, string_agg(reason, '; ' ORDER BY reason) AS reason
    FROM reconstruct_skipped GROUP BY node
), graded AS (
    SELECT a.node, r.role, coalesce(c.n, 0) AS requests,
           coalesce(l.events, 0) AS ledger_events, l.first_ts AS ledger_first_ts,
           l.last_ts AS ledger_last_ts, coalesce(h.n, 0) AS holes, h.lost,
           coalesce(u.n, 0) AS uncovered_requests,
           a.node IN (SELECT node FROM reconstructed_nodes) AS reconstructed,
           l.node IS NOT NULL AS has_ledger, k.reason AS skip_reason,
           a.node IN (SELECT node FROM numbering) AS odd_numbering,
           $external AS external, coalesce(b.n, 0) AS blind,
           coalesce(bf.n, 0) AS blind_fitting, coalesce(tc.n, 0) AS counted
    FROM all_nodes a
    LEFT JOIN roles r USING (node)
    LEFT JOIN counts c USING (node)
    LEFT JOIN temp.analysis_ledger_nodes l USING (node)
    LEFT JOIN holes h USING (node)
    LEFT JOIN uncovered u USING (node)
    LEFT JOIN skipped k USING (node)
    LEFT JOIN blind b USING (node)
    LEFT JOIN blind_fitting bf USING (node)
    LEFT JOIN counted tc USING (node)
)
SELECT node, role, requests, ledger_events, ledger_first_ts, ledger_last_ts, holes,
       uncovered_requests, reconstructed,
       CASE WHEN has_ledger AND holes = 0 AND uncovered_requests = 0 THEN 'ledger'
            WHEN has_ledger THEN 'ledger-with-holes'
            WHEN reconstructed THEN 'reconstructed'
            ELSE 'screening' END AS evidence,
       CASE
           WHEN has_ledger AND holes = 0 AND uncovered_requests = 0
               THEN format('complete KV ledger, {} event(s)', ledger_events)
           WHEN has_ledger
               THEN format('KV ledger of {} event(s) with {} known hole(s){}; {} request(s) it '
                           'decoded are judged as without a ledger (screening{})',
                           ledger_events, holes,
                           CASE WHEN lost IS NOT NULL THEN format(', {} event(s) lost', lost)
                                ELSE '' END,
                           uncovered_requests,
                           CASE WHEN reconstructed THEN ', reconstruction' ELSE '' END)
           WHEN reconstructed
               THEN 'no KV ledger; the page trace was rebuilt from the request log with the '
                    'engine''s allocator (kvforensics reconstruct)'
           WHEN skip_reason IS NOT NULL
               THEN 'no KV ledger; reconstruction could not run: ' || skip_reason
           ELSE 'no KV ledger and no reconstruction (run kvforensics reconstruct, or record a '
                'ledger with kvforensics tap); judged from the gateway log and node facts only'
       END
       || CASE WHEN NOT has_ledger
               THEN '; without a ledger only stubs (prompts the engine did not compute) are '
                    'looked for: a page handed out while its holder still held it, or a '
                    'prefix-cache hash collision, leaves nothing in the gateway log (record a '
                    'ledger with kvforensics tap to see them)'
               ELSE '' END
       || CASE WHEN blind > 0
               THEN format('; for {} request(s) it decoded without a ledger, stubs could not be '
                           'looked for at all (nor would their times to first token tell a '
                           'stub apart): give the prefill node''s pool size (nodes.csv '
                           'pool_slots, or its start-up log in logs/), the responses'' cached '
                           'tokens (requests.csv cached_tokens) with its engine named as vLLM '
                           '(nodes.csv engine, or its start-up log), or its engine log', blind)
               ELSE '' END
       || CASE WHEN blind_fitting > blind
               THEN format('; for {} request(s) it decoded without a ledger, a stub of a prompt '
                           'that fits the pool (an engine computing less than it was given) '
                           'could not be looked for: neither the responses'' cached tokens '
                           '(requests.csv cached_tokens) from an engine that counts a stub as '
                           'cached (vLLM, named in nodes.csv engine or by its start-up log; '
                           'SGLang''s stub is a prompt cut to one token, whose cached tokens '
                           'look like any other''s), nor a time model of its prefill node '
                           'that would tell its stub apart (at least 5 ordinary timed requests '
                           'of 256 computed tokens or more, and its short prompts'' times, less '
                           'their computing, nearly all below the time the model flags: noisy '
                           'gateway times or queueing hide a stub of a prompt quick to compute), '
                           'nor its prefill node''s own token counters (the SGLang log''s '
                           'prefill batch lines, logs/)',
                           blind_fitting)
               ELSE '' END
       || CASE WHEN counted > 0 AND NOT (has_ledger AND holes = 0 AND uncovered_requests = 0)
               THEN format('; for {} request(s) it decoded without a ledger, the prompt tokens '
                           'its prefill node''s engine counted (SGLang prefill batch lines) were '
                           'compared with the billed tokens (token-shortfall)', counted)
               ELSE '' END
       || CASE WHEN has_ledger AND $remote
               THEN '; its ledger is read from a remote store, where seq gaps are not looked '
                    'for (each part is fetched once; only the tap''s own reports of what it lost)'
               ELSE '' END
       || CASE WHEN odd_numbering
               THEN '; its ledger''s seq is not one consecutive count per recording process, '
                    'so lost events cannot be told from it'
               ELSE '' END AS note
FROM graded
ORDER BY node;
