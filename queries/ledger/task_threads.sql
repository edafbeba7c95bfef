-- The DuckDB threads of a partition task's own connection (forensics.analysis.partitions, and
-- forensics.ledger.check for the checks run at once on one machine or as Ray tasks):
-- {threads}, its share of the cores (SET takes no parameter).
SET threads = {threads};
