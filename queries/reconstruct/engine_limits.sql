-- A node's scheduler limits as its engine logged them at its latest start (vLLM:
-- max_num_seqs, max_num_batched_tokens, chunked_prefill, prefix_caching), with what decides
-- the defaults of a limit not logged (device, data_parallel_size), the block sizes of more than
-- one KV cache group where logged (kv_cache_groups), whether an SGLang decode node kept a radix
-- cache of its own (decode_radix_cache) and the decode headroom it kept free
-- (reserved_decode_tokens), and whether the operator's
-- arguments were logged at all ('operator_args' = 'logged': a whole `non-default args` line was
-- read, so a limit it does not name was left at vLLM's default). Facts not logged are absent.
WITH latest AS (
    SELECT * FROM node_facts
    WHERE node = $node AND run = (SELECT max(run) FROM node_facts WHERE node = $node)
)
SELECT fact, value
FROM latest
WHERE fact IN ('max_num_seqs', 'max_num_batched_tokens', 'chunked_prefill', 'prefix_caching',
               'device', 'data_parallel_size', 'kv_cache_groups', 'decode_radix_cache',
               'reserved_decode_tokens')
UNION ALL
SELECT 'operator_args', 'logged'
WHERE EXISTS (
    SELECT 1 FROM latest l
    WHERE l.source = 'vllm.args'
      AND NOT EXISTS (  -- a line cut short may have lost the limit (queries/ingest/log_cut_lines.sql)
          SELECT 1 FROM quarantine q
          WHERE q.table_name = 'logs' AND q.file = l.src_file AND q."row" = l.src_line))
ORDER BY fact;
