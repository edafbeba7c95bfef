-- The gateway's row of each request explained (the first in file order when the log repeats an
-- id, as the analysis takes it), with its account's name and how often the log has the id.
SELECT r.request_id, r.account_id, a.name AS account_name, r.model, r.received_at,
       r.first_token_at, r.completed_at, r.http_status, r.prompt_tokens, r.completion_tokens,
       r.cached_tokens, r.prefill_node, r.decode_node, r.node, r.temperature,
       count(*) OVER (PARTITION BY r.request_id) AS log_rows
FROM requests r
LEFT JOIN (SELECT account_id, name FROM accounts
           QUALIFY row_number() OVER (PARTITION BY account_id ORDER BY src_file, src_row) = 1) a
       USING (account_id)
WHERE r.request_id IN (SELECT request_id FROM explain_ids)
QUALIFY row_number() OVER (PARTITION BY r.request_id ORDER BY r.src_file, r.src_row) = 1
ORDER BY r.request_id;
