-- possible_cache_hits: a stub's pages reach later requests through the prefix cache. An engine
-- that takes a stub's prompt as computed caches the blocks it handed the stub under that
-- prompt's hashes, though nothing of the prompt was written there; a later request whose
-- prompt begins with the same tokens is served those blocks from the cache and reads what
-- their earlier owners left, the stub's own leakers' data. So for every stub suspect
-- ($stub_reasons) that no complete ledger covers, every request whose prefill ran on the node
-- holding the stub's pages (its serving prefill node is the stub's serving decode node), whose
-- first token came after the stub was received and which reports a prefix-cache hit
-- (cached_tokens > 0, or not logged: a hit is not ruled out) is a possible receiver of every
-- possible leaker the stub still has (possible_exposures, after what evidence cleared), basis
-- 'stub-cache-hit'.
--
-- Whose prompts begin alike the log does not say; what it shows decides how far that reaches.
-- Requests of the stub's own account always may. Another account's may where the node shows
-- prompts shared across accounts: a hit (cached_tokens > 0) of a request that is no suspect
-- and that no earlier request of its own account on the node could have served (none received
-- before it with a prompt at least that long), or no cached_tokens logged on the node at all.
-- Only then can the leaking side gain a request the stub's own pairs do not put there (a
-- leaker of the stub's account, foreign to such a receiver).
--
-- A stub whose row names no node (a log without node columns, several engines) may have been
-- on any: every request with a hit after it, on whichever node, may have read its blocks, and
-- pairs with the stub's leakers on that node or on none the log names; prompts count as shared
-- across accounts where any node, or the requests that name none, show it.
--
-- A node whose engine log says prefix caching was off (at every start logged) has no such
-- read. Nothing here is cleared by a rebuild: the rebuild gives each account one shared prefix,
-- and an account's second conversation (another prefix, which the stub's prompt may have
-- begun) would have its hits served elsewhere in the model than in the engine. Where a
-- rebuild's runs found such a read (reconstructed_exposures), the pair is listed
-- `reconstructed` as well.
--
-- This script finds the second readers (_cache_hitters: per stub, each request that may have
-- hit its blocks). forensics.analysis.screening then counts their pairs with the stubs' leakers
-- (cache_hit_pairs.sql) and lists them one by one up to $second_read_pairs
-- (cache_hits_full.sql), condensed beyond (cache_hits_condensed.sql); cache_hits_insert.sql
-- adds them to possible_exposures.
-- Whether a stub's pair on leaker_node may have been read by a second reader on hit_node: on
-- the stub's node; a nodeless stub's on the hit's node or on none the log names (''). Used by
-- the scripts that pair the second readers (cache_hit_pairs.sql, cache_hits_*.sql).
CREATE OR REPLACE TEMP MACRO kvf_second_read_on(stub_node, hit_node, leaker_node) AS
    leaker_node = stub_node
    OR stub_node IS NULL AND (leaker_node = '' OR hit_node IS NULL OR leaker_node = hit_node);

CREATE OR REPLACE TEMP TABLE _cache_hitters AS
WITH stubs AS (
    SELECT s.request_id, s.account_id, s.decode_node AS node, q.received_at
    FROM screening s JOIN work.analysis_requests q USING (request_id)
    WHERE NOT s.ledger_covered
      AND len(list_intersect(s.reasons, $stub_reasons)) > 0
      AND (s.decode_node IS NULL OR s.decode_node NOT IN (
          SELECT node FROM node_facts WHERE fact = 'prefix_caching'
          GROUP BY node HAVING bool_and(lower(value) = 'false')))
), served AS (  -- on the stubs' nodes: each request, and the longest prompt of its account before
    SELECT q.serving_prefill_node AS node, q.request_id, q.cached_tokens,
           max(q.prompt_tokens) OVER (
               PARTITION BY q.serving_prefill_node, q.account_id
               ORDER BY q.received_at, q.request_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS account_before
    FROM work.analysis_requests q
    WHERE q.serving_prefill_node IN (SELECT node FROM stubs)
       OR EXISTS (SELECT 1 FROM stubs WHERE node IS NULL)  -- a nodeless stub: every node's
), shared AS (  -- nodes whose log shows prompts shared across accounts, or no hits logged
    SELECT node FROM served
    WHERE cached_tokens > 0 AND coalesce(account_before, 0) < cached_tokens
      AND request_id NOT IN (
          SELECT request_id FROM screening
          WHERE len(list_intersect(reasons, $stub_reasons)) > 0)
    UNION
    SELECT node FROM served GROUP BY node HAVING bool_and(cached_tokens IS NULL)
), hitters AS (
    SELECT st.request_id AS stub_id, st.account_id AS stub_account_id, st.node,
           h.serving_prefill_node AS hit_node, h.request_id, h.account_id
    FROM stubs st
    JOIN work.analysis_requests h
      ON (h.serving_prefill_node = st.node OR st.node IS NULL)
     AND h.request_id <> st.request_id
     AND coalesce(h.cached_tokens, 1) > 0
     AND coalesce(h.first_token_at, h.completed_at, st.received_at) >= st.received_at
     AND (st.node IN (SELECT node FROM shared)
          OR st.node IS NULL AND EXISTS (SELECT 1 FROM shared)
          OR h.account_id = st.account_id)
)
SELECT * FROM hitters;
