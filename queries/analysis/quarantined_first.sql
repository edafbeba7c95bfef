-- What the quarantine holds, per input file: how many rows, and its first row's fault (row,
-- column, value, reason), so that a case left with nothing to analyse says why.
SELECT file, count(*) AS rows,
       arg_min("row", coalesce("row", 0)) AS first_row,
       arg_min("column", coalesce("row", 0)) AS first_column,
       arg_min("value", coalesce("row", 0)) AS first_value,
       arg_min(reason, coalesce("row", 0)) AS first_reason
FROM quarantine
GROUP BY file
ORDER BY rows DESC, file
LIMIT 5;
