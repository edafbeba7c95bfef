-- A view over nodes and the tables the log adapters write (created when the case database has
-- them).

-- Per node: does one full-length request fit its KV pool, and how its sources agree.
CREATE OR REPLACE VIEW node_capacity AS
SELECT n.node, n.role, n.engine, n.pool_slots, n.context_len,
       n.pool_slots >= n.context_len AS fits,
       (SELECT min(s.pool_slots) FROM node_starts s WHERE s.node = n.node) AS smallest_logged_pool,
       (SELECT count(*) FROM node_starts s WHERE s.node = n.node) AS logged_starts,
       (SELECT count(*) FROM node_disagreements d WHERE d.node = n.node) AS disagreements,
       n.src_file, n.src_row
FROM nodes n;

COMMENT ON VIEW node_capacity IS 'One row per node: pool against context length (fits), the smallest pool its logs show, its logged engine starts and how many fields the nodes file and its logs disagree on.';
