-- The memory limit the connection was opened with (queries/schema/settings.sql), or DuckDB's
-- own setting as it reports it (e.g. '3.7 GiB') for a connection opened otherwise.
SELECT coalesce(getvariable('kvf_memory_limit'), current_setting('memory_limit'));
