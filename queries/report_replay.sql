-- Replay verdicts: counts per verdict, and the rows ($1: how many) for the table. Wall-clock
-- columns (seconds, tokens_per_s) are left out so that the report stays byte-identical.
SELECT request_id, verdict, reason, tokens, device, model,
       delivered_sha256 = contaminated_sha256 AS contaminated_matches,
       delivered_sha256 = clean_sha256 AS clean_matches,
       count(*) OVER (PARTITION BY verdict) AS verdict_total, count(*) OVER () AS total
FROM replay_results
ORDER BY CASE verdict WHEN 'confirmed' THEN 0 ELSE 1 END, verdict, request_id
LIMIT $1;
