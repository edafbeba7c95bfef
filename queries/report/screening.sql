-- Screening reasons with the number of requests flagged by each.
SELECT reason, count(*) AS requests, count(*) FILTER (WHERE NOT ledger_covered) AS without_ledger
FROM (SELECT unnest(reasons) AS reason, ledger_covered FROM screening)
GROUP BY reason ORDER BY reason;
