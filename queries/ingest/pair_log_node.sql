-- One engine, named two ways: the case's engine logs belong to one node that no request
-- names (its file's name, say `logs/engine.log`), and the request log names one node that
-- neither the nodes file nor a log gives facts for (`vllm-0`, say). A gateway and an engine
-- naming the one engine differently is the only reading that fits, so the log's rows are
-- renamed to the request log's node and a warning says so, with the fix where it is wrong.
-- Run only without a KV ledger (a ledger names nodes of its own) and without logs/node_map.csv
-- (the operator's word). With two log nodes, or two nodes in the request log, or a nodes file
-- that names either node, nothing is renamed.
CREATE OR REPLACE TEMP TABLE _log_pair AS
WITH from_log AS (
    SELECT count(DISTINCT node) AS n, min(node) AS node FROM log_files
), served AS (
    SELECT count(DISTINCT node) AS n, min(node) AS node
    FROM (SELECT prefill_node AS node FROM requests
          UNION ALL SELECT decode_node FROM requests
          UNION ALL SELECT node FROM requests)
)
SELECT l.node AS log_node, s.node
FROM from_log l, served s
WHERE l.n = 1 AND s.n = 1 AND l.node <> s.node
  AND s.node NOT IN (SELECT node FROM nodes)
  AND l.node NOT IN (  -- a nodes file's row keeps its name
      SELECT node FROM nodes WHERE src_file NOT IN (SELECT path FROM log_files));

INSERT INTO ingest_warnings BY NAME
SELECT 'logs' AS table_name, f.path AS file, NULL AS "row", 'node' AS "column",
       p.log_node AS "value",
       format('read as the log of node {}: the case''s only engine log names node {}, which no '
              || 'request names, and the request log names only {}, for which no other input '
              || 'gives facts (if the log is another engine''s, name its node in '
              || 'logs/node_map.csv, header node,file_glob)', p.node, p.log_node, p.node)
           AS reason
FROM _log_pair p JOIN log_files f ON f.node = p.log_node;

UPDATE nodes SET node = p.node FROM _log_pair p WHERE nodes.node = p.log_node;
UPDATE node_starts SET node = p.node FROM _log_pair p WHERE node_starts.node = p.log_node;
UPDATE node_facts SET node = p.node FROM _log_pair p WHERE node_facts.node = p.log_node;
UPDATE node_disagreements SET node = p.node FROM _log_pair p
WHERE node_disagreements.node = p.log_node;
UPDATE engine_evidence SET node = p.node FROM _log_pair p
WHERE engine_evidence.node = p.log_node;
UPDATE engine_counters SET node = p.node FROM _log_pair p
WHERE engine_counters.node = p.log_node;
UPDATE log_files SET node = p.node FROM _log_pair p WHERE log_files.node = p.log_node;

DROP TABLE _log_pair;
