-- A node's scheduler limits as its engine logged them at its latest start (vLLM:
-- max_num_seqs, max_num_batched_tokens, chunked_prefill); facts not logged are absent.
SELECT fact, value
FROM node_facts
WHERE node = $node
  AND fact IN ('max_num_seqs', 'max_num_batched_tokens', 'chunked_prefill', 'prefix_caching')
  AND run = (SELECT max(run) FROM node_facts WHERE node = $node)
ORDER BY fact;
