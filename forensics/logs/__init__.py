"""Engine logs: node facts (pool size, context length, page size, role) and per-request
evidence read from SGLang and vLLM logs, the pool-versus-context audit, and the case loader.

    forensics.logs.load.load_logs(con, case_dir, files) -> LogsSummary  (into the case database)
    forensics.logs.read.read_logs([(path, naming, shown)]) -> LogsSummary  (no database)

The package itself imports nothing, so that a process that only parses (a parsing worker) does
not load the database modules.
"""
