-- Whether node $node's page size is only the default the log audit assumed for vLLM where its
-- start-up lines name no block size (node_facts source 'default', forensics/logs/audit.py):
-- no nodes-file row gives one and no log line does. Screening's page rule may use such a
-- guess (a block size that divides the engine's flags a subset of what the engine's own would),
-- a rebuilt page trace must not: vLLM's default block size depends on the platform and the
-- attention backend (128 on the CPU build of 0.32), and pages of the wrong size put other
-- requests in a stub's blocks.
SELECT NOT EXISTS (
           SELECT 1 FROM nodes n
           WHERE n.node = $node AND n.page_size IS NOT NULL
             AND n.src_file IN (SELECT path FROM input_files WHERE table_name = 'nodes'))
       AND EXISTS (
           SELECT 1 FROM node_facts f
           WHERE f.node = $node AND f.fact = 'page_size' AND f.source = 'default')
       AND NOT EXISTS (
           SELECT 1 FROM node_facts f
           WHERE f.node = $node AND f.fact = 'page_size' AND f.source <> 'default')
