-- Known holes in the nodes' ledgers, in node and time order, at most $1 rows.
SELECT node, kind, first_ts, last_ts, events_lost, source, detail
FROM ledger_holes
ORDER BY node, first_ts NULLS FIRST, kind
LIMIT $1;
