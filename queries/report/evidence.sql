-- Findings from the engines' own logs, per node and kind, with the first message as an example.
SELECT node, kind, count(*) AS lines, min(ts) AS first_at, max(ts) AS last_at,
       max(value) AS max_value, max(max_value) AS limit_value,
       arg_min(message, (ts, src_file, src_line)) AS example
FROM engine_evidence GROUP BY node, kind ORDER BY node, kind;
