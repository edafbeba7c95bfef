-- The DuckDB threads of a partition task's own connection (forensics.analysis.partitions):
-- {threads}, its share of the cores (SET takes no parameter).
SET threads = {threads};
