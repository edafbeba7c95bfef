-- The headline figures of a case: the one set of numbers that the analyze line, the summary
-- investigate prints, the report (its data-figure elements), notifications/summary.json and
-- every --json read (forensics/figures.py runs it; nothing else counts them again).
-- Needs the TEMP view report_exposure_pairs (queries/report/exposure_pairs.sql).
-- What each counts:
--   cross_* / receiving_* / leaking_*: the ledger's cross-account exposures only (a request
--     reading KV of another account's request), requests and accounts counted once each;
--   same_account_*: exposures between two requests of one account, never notified, shown apart;
--   unknown_account_runs: runs where a request is missing from the request log;
--   listed_*: the notification lists as written (cross-account only, every confidence:
--     ledger, confirmed, reconstructed, possible); these equal the lists' row counts;
--   tokens: docs/DESIGN.md section 6 token exposures (distinct slots per request pair and node).
WITH p AS (SELECT * FROM report_exposure_pairs)
SELECT
    (SELECT count(*) FROM exposures WHERE cross_account) AS cross_runs,
    (SELECT coalesce(sum(tokens), 0) FROM p WHERE cross_account) AS cross_tokens,
    (SELECT count(DISTINCT receiver_request_id) FROM p WHERE cross_account) AS receiving_requests,
    (SELECT count(DISTINCT receiver_account_id) FROM p WHERE cross_account) AS receiving_accounts,
    (SELECT count(DISTINCT leaker_request_id) FROM p WHERE cross_account) AS leaking_requests,
    (SELECT count(DISTINCT leaker_account_id) FROM p WHERE cross_account) AS leaking_accounts,
    (SELECT count(*) FROM exposures WHERE NOT cross_account) AS same_account_runs,
    (SELECT coalesce(sum(tokens), 0) FROM p WHERE NOT cross_account) AS same_account_tokens,
    (SELECT count(DISTINCT receiver_request_id) FROM p WHERE NOT cross_account)
        AS same_account_receiving_requests,
    (SELECT count(DISTINCT leaker_request_id) FROM p WHERE NOT cross_account)
        AS same_account_leaking_requests,
    (SELECT count(*) FROM exposures WHERE cross_account IS NULL) AS unknown_account_runs,
    (SELECT count(DISTINCT node) FROM exposures) AS nodes_affected,
    (SELECT min(first_read_at) FROM exposures) AS first_exposure_at,
    (SELECT max(last_read_at) FROM exposures) AS last_exposure_at,
    (SELECT count(*) FROM violations) AS violation_runs,
    (SELECT count(DISTINCT receiver_request_id) FROM p
     WHERE cross_account AND (rank = 3 OR receiver_request_id IN
         (SELECT request_id FROM replay_results
          WHERE verdict = 'confirmed' AND COALESCE(model_matches, true))))
        AS confirmed_requests,
    (SELECT count(*) FROM screening WHERE len(reasons) > 0) AS screened_suspects,
    (SELECT count(*) FROM screening WHERE len(reasons) > 0 AND NOT ledger_covered)
        AS possible_receivers,
    (SELECT count(*) FROM requests) AS requests_total,
    (SELECT count(*) FROM quarantine) AS quarantined_rows,
    (SELECT count(DISTINCT request_id) FROM affected_requests WHERE side = 'receiving')
        AS listed_receiving_requests,
    (SELECT count(*) FROM affected_accounts WHERE side = 'receiving') AS listed_receiving_accounts,
    (SELECT count(DISTINCT request_id) FROM affected_requests WHERE side = 'leaking')
        AS listed_leaking_requests,
    (SELECT count(*) FROM affected_accounts WHERE side = 'leaking') AS listed_leaking_accounts,
    (SELECT count(*) FROM affected_accounts WHERE side = 'receiving' AND confidence = 'possible')
        AS possible_receiving_accounts,
    (SELECT count(*) FROM affected_accounts WHERE side = 'leaking' AND confidence = 'possible')
        AS possible_leaking_accounts,
    (SELECT count(*) FROM node_evidence) AS nodes_known,
    (SELECT count(*) FROM node_evidence WHERE evidence = 'ledger') AS nodes_ledger,
    (SELECT count(*) FROM node_evidence WHERE evidence = 'ledger-with-holes') AS nodes_holes,
    (SELECT count(*) FROM node_evidence WHERE evidence = 'reconstructed') AS nodes_reconstructed,
    (SELECT count(*) FROM node_evidence WHERE evidence = 'screening') AS nodes_screening,
    (SELECT count(*) FROM ledger_holes) AS ledger_holes,
    (SELECT count(*) FROM cleared_findings) AS cleared_findings,
    (SELECT count(*) FROM screening
     WHERE NOT ledger_covered AND answered AND len(coalesce(signals, [])) = 0)
        AS unscreened_requests,
    -- over-pool and engine-log see only the stub of a prompt the pool cannot hold; a stub of a
    -- prompt that fits (an engine computing less than it was given) shows only as an
    -- implausible time to first token or cached-token count, or in the engine's own token
    -- counters (token-counters: SGLang's prefill batch lines)
    (SELECT count(*) FROM screening
     WHERE NOT ledger_covered AND answered
       AND NOT list_has_any(coalesce(signals, []),
                            ['fast-ttft', 'cache-implausible', 'token-counters']))
        AS unscreened_fitting_requests,
    -- suspects whose serving node the log does not name: every request is a possible source
    -- of theirs (queries/analysis/possible_exposures.sql)
    (SELECT count(*) FROM screening
     WHERE len(reasons) > 0 AND NOT ledger_covered AND decode_node IS NULL) AS nodeless_suspects,
    -- requests whose row names no node, taken as served by the case's one engine node
    -- (queries/analysis/requests.sql)
    (SELECT count(DISTINCT r.request_id) FROM requests r JOIN screening s USING (request_id)
     WHERE r.node IS NULL AND r.prefill_node IS NULL AND r.decode_node IS NULL
       AND s.decode_node IS NOT NULL) AS sole_node_requests,
    -- requests listed as possible second readers of a stub's pages with their pairs condensed
    -- (queries/analysis/cache_hits_condensed.sql): their counterpart counts are not full
    (SELECT count(DISTINCT receiver_request_id) FROM possible_exposures
     WHERE basis = 'stub-cache-hit-condensed') AS condensed_second_reads;
