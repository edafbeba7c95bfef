-- A part in folder node=NAME holds the events of node NAME only: the analysis reads each
-- partition alone, so a row of another node there would be missed. Such a row is quarantined.
UPDATE checked
SET q = kvf_bad('node', node, 'row is in folder node=' || $node || ' but names node ' || node
                || ', move it to the folder of its node')
WHERE q IS NULL AND node <> $node;
