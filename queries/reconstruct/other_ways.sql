-- The leaking accounts only the pairs kept apart name (the ways the nodes' SGLang release does
-- not build): in no listed rebuilt cross-account pair.
SELECT count(DISTINCT leaker_account_id) AS accounts
FROM reconstructed_other_ways
WHERE cross_account
  AND leaker_account_id NOT IN (
      SELECT leaker_account_id FROM reconstructed_exposures
      WHERE cross_account AND verdict IS DISTINCT FROM 'cleared'
  );
