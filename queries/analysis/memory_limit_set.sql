-- A new DuckDB memory limit ({limit}: a size literal such as '1048576KiB').
SET memory_limit = {limit};
