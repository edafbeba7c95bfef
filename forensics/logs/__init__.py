"""Engine logs: node facts (pool size, context length, page size, role) and per-request
evidence read from SGLang and vLLM logs, the pool-versus-context audit, and the case loader.

    load_logs(con, case_dir, files) -> LogsSummary     (into the case database)
    read_logs([(path, naming, shown)]) -> LogsSummary  (no database; `audit-logs`)
"""

from forensics.logs.load import load_logs
from forensics.logs.read import read_logs
from forensics.logs.summary import LogsSummary

__all__ = ["LogsSummary", "load_logs", "read_logs"]
