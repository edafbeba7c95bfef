-- The token counter lines read from the logs (the registered logs_counters_in), with the time
-- as written turned into a timestamp where it has a date.
INSERT INTO engine_counters BY NAME
SELECT node, dp_rank, stamp, kind, new_seqs, new_tokens, cached_tokens, prompt_throughput,
       generation_throughput, running, waiting, prefix_hit_rate, src_file, src_line,
       CASE WHEN length(stamp) >= 19
            THEN try_cast(replace(replace(stamp, ',', '.'), 'T', ' ') AS TIMESTAMP) END AS ts
FROM logs_counters_in
ORDER BY src_file, src_line;
