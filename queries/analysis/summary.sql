-- The ledger's own figures `kvforensics analyze` prints (from queries/analysis/ledger_nodes.sql)
-- and the evidence each node was judged on (node_evidence). Requests, accounts and tokens are
-- not counted here, nor the requests in which stubs could not be looked for: they are the
-- case's headline figures (queries/figures/headline.sql).
SELECT
    (SELECT coalesce(sum(reads), 0) FROM temp.analysis_ledger_nodes) AS reads,
    (SELECT coalesce(sum(events), 0) FROM temp.analysis_ledger_nodes) AS events,
    (SELECT count(*) FROM temp.analysis_ledger_nodes) AS ledger_nodes,
    (SELECT coalesce(map_from_entries(list({'k': kind, 'v': n})), MAP {})
       FROM (SELECT kind, count(*) AS n FROM exposures GROUP BY kind)) AS exposures_by_kind,
    (SELECT count(*) FROM exposures) AS exposure_runs,
    (SELECT coalesce(map_from_entries(list({'k': violation, 'v': n})), MAP {})
       FROM (SELECT violation, count(*) AS n FROM violations GROUP BY violation))
        AS violations_by_kind,
    (SELECT coalesce(sum(uninitialised_slots), 0) FROM read_stats) AS uninitialised_slots,
    (SELECT count(*) FROM screening WHERE len(reasons) > 0) AS screened_suspects,
    (SELECT count(*) FROM screening WHERE len(reasons) > 0 AND NOT ledger_covered)
        AS screened_suspects_without_ledger,
    (SELECT count(*) FROM possible_exposures) AS possible_pairs,
    (SELECT count(*) FROM reconstructed_exposures
     WHERE cross_account AND verdict IS DISTINCT FROM 'cleared') AS reconstructed_pairs,
    (SELECT coalesce(map_from_entries(list({'k': node, 'v': evidence} ORDER BY node)), MAP {})
       FROM node_evidence) AS evidence_by_node,
    (SELECT coalesce(map_from_entries(list({'k': node, 'v': note} ORDER BY node)), MAP {})
       FROM node_evidence
     WHERE evidence <> 'ledger' OR note NOT LIKE 'complete KV ledger, % event(s)') AS evidence_notes,
    (SELECT count(*) FROM ledger_holes) AS ledger_holes,
    (SELECT coalesce(map_from_entries(list({'k': side || ' ' || confidence, 'v': n})), MAP {})
       FROM (SELECT side, confidence, count(*) AS n FROM affected_accounts GROUP BY ALL))
        AS accounts_by_confidence,
    (SELECT count(*) FROM cleared_findings) AS cleared_findings;
