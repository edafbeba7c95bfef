"""`kvforensics audit-logs`: does every node's KV pool hold one full-length request?"""

from __future__ import annotations

import json
import sys

from forensics.cli.app import app, console, finish
from forensics.cli.params import Json, LogPaths, NodeMap
from forensics.logs.discover import discover
from forensics.logs.naming import read_node_map
from forensics.logs.read import read_logs
from forensics.logs.report import print_audit
from forensics.logs.summary import node_json


@app.command("audit-logs")
def audit_logs(paths: LogPaths, json_out: Json = False, node_map: NodeMap = None) -> None:
    """Compare each node's KV pool with its context length, from the engines' own logs.

    Exit 1 when a node cannot hold one full-length request (or its log does not say)."""
    summary = read_logs(discover(paths), read_node_map(node_map) if node_map else None)
    if json_out:
        nodes = [node_json(n) for n in summary.nodes]
        sys.stdout.write(json.dumps(nodes, indent=2, sort_keys=True, default=str) + "\n")
    else:
        print_audit(console, summary)
    finish(bool(summary.misfits))
