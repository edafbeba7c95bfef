-- Replay verdicts: one row per suspect (the confirmation by a run with the request log's model
-- when there is one, else the latest run's verdict), counts per verdict, and the rows ($1: how
-- many) for the table. Wall-clock columns (seconds, tokens_per_s) are left out so that the
-- report stays byte-identical.
WITH latest AS (
    SELECT *
    FROM replay_results
    QUALIFY row_number() OVER (
        PARTITION BY request_id
        ORDER BY (verdict = 'confirmed' AND COALESCE(model_matches, true)) DESC,
                 COALESCE(model_matches, true) DESC, run_id DESC NULLS LAST) = 1
)
SELECT request_id, verdict, basis, round(evidence_bits, 1) AS evidence_bits, reason, tokens,
       device, model,
       delivered_sha256 = contaminated_sha256 AS contaminated_matches,
       delivered_sha256 = clean_sha256 AS clean_matches,
       count(*) OVER (PARTITION BY verdict) AS verdict_total, count(*) OVER () AS total
FROM latest
ORDER BY CASE verdict WHEN 'confirmed' THEN 0 ELSE 1 END, verdict, request_id
LIMIT $1;
