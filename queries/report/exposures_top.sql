-- The exposure pairs with the most tokens ($1: how many), all kinds, for the report's table.
SELECT p.receiver_request_id, p.receiver_account_id, p.leaker_request_id, p.leaker_account_id,
       p.node, p.tokens, p.runs, p.first_read_at, p.cross_account,
       CASE p.rank WHEN 3 THEN 'confirmed' WHEN 2 THEN 'ledger' ELSE 'possible' END AS confidence,
       (SELECT string_agg(DISTINCT kind, ', ' ORDER BY kind) FROM exposures e
        WHERE e.receiver_request_id = p.receiver_request_id
          AND e.leaker_request_id = p.leaker_request_id AND e.node = p.node) AS kinds,
       count(*) OVER () AS total
FROM report_exposure_pairs p
ORDER BY p.tokens DESC, p.first_read_at, p.receiver_request_id, p.leaker_request_id, p.node
LIMIT $1;
