-- The token counts per (receiver, node, leaker) in scope: first_read_at is the pair's first read.
CREATE OR REPLACE TEMP TABLE kvf_scope_exposure_tokens AS
SELECT * FROM exposure_tokens
WHERE kvf_in_scope(first_read_at, receiver_account_id, leaker_account_id,
                   $since::TIMESTAMPTZ, $until::TIMESTAMPTZ, $accounts::VARCHAR[]);
