"""`kvforensics audit-logs`: does every node's KV pool hold one full-length request?"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from forensics.cli.app import app, console, finish
from forensics.logs.discover import discover
from forensics.logs.naming import read_node_map
from forensics.logs.read import read_logs
from forensics.logs.report import print_audit
from forensics.logs.summary import node_json


@app.command("audit-logs")
def audit_logs(
    paths: list[Path] = typer.Argument(
        ..., help="SGLang or vLLM log files (plain, .gz or .zst) or folders of them."
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print a JSON list, one object per node, on stdout."
    ),
    node_map: Path | None = typer.Option(
        None,
        "--node-map",
        help="CSV with header node,file_glob naming the node of each file "
        "(default: the node is taken from the file name).",
    ),
) -> None:
    """Compare each node's KV pool with its context length, from the engines' own logs.

    Exit 1 when a node cannot hold one full-length request (or its log does not say)."""
    summary = read_logs(discover(paths), read_node_map(node_map) if node_map else None)
    if json_out:
        nodes = [node_json(n) for n in summary.nodes]
        sys.stdout.write(json.dumps(nodes, indent=2, sort_keys=True, default=str) + "\n")
    else:
        print_audit(console, summary)
    finish(bool(summary.misfits))
