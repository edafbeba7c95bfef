-- A part in folder node=NAME holds node NAME's events only: the analysis reads each node's
-- partition alone, so a row of another node there would be missed. Such a row is quarantined.
UPDATE checked
SET q = kvf_bad('node', node, 'row is in folder node=' || $node || ' but names node ' || node
                || '; move it to its node''s folder')
WHERE q IS NULL AND node <> $node;
