-- Rows the reader could not split into fields, one per record, numbered like the good rows:
-- rec = physical line minus the header lines. gap(rec) = good rows before it, used to number
-- the good rows: the k-th good row is record k + (number of rejects whose gap < k).
CREATE OR REPLACE TEMP TABLE bad_rows AS
SELECT rec, raw, reason, "column", rec - row_number() OVER (ORDER BY rec) AS gap,
       row_number() OVER (ORDER BY rec) AS j
FROM (
    SELECT CAST(line AS BIGINT) - $header_lines AS rec,
           first(csv_line ORDER BY column_idx) AS raw,
           first(error_message ORDER BY column_idx) AS reason,
           first(column_name ORDER BY column_idx) AS "column"
    FROM kvf_rejects
    GROUP BY line
);
CREATE OR REPLACE TEMP TABLE bad_gaps AS SELECT gap, max(j) AS j FROM bad_rows GROUP BY gap;
CREATE OR REPLACE TEMP TABLE numbered_rows AS
SELECT r.k + coalesce(g.j, 0) AS src_row, r.* EXCLUDE (k)
FROM (SELECT rowid - min(rowid) OVER () + 1 AS k, * FROM raw_rows) r
ASOF LEFT JOIN bad_gaps g ON r.k > g.gap;
