-- The settings of every connection to a case database: times in UTC, no progress bar on the
-- terminal, and the memory budget ({memory_limit}: a quoted size such as '4GB'; SET takes no
-- parameter).
SET TimeZone = 'UTC';
SET enable_progress_bar = false;
SET memory_limit = {memory_limit};
-- The limit as given, kept exactly: DuckDB reports its setting rounded ('3.7 GiB'), and the
-- analysis lowers DuckDB's limit while the sweep runs and sets this one back afterwards.
SET VARIABLE kvf_memory_limit = {memory_limit};
