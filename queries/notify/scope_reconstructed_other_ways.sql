-- Pairs kept apart in scope: read_at (the receiver's first token) stands for the read.
CREATE OR REPLACE TEMP TABLE kvf_scope_reconstructed_other_ways AS
SELECT * FROM reconstructed_other_ways
WHERE kvf_in_scope(read_at, receiver_account_id, leaker_account_id,
                   $since::TIMESTAMPTZ, $until::TIMESTAMPTZ, $accounts::VARCHAR[]);
