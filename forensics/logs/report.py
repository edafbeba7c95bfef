"""The human summary of `audit-logs`: one table row per node, then the line counts."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from forensics.base.textsafe import visible
from forensics.logs.summary import LogsSummary, node_json

_VERDICT = {True: "[green]fits[/]", False: "[bold red]too small[/]", None: "[yellow]unknown[/]"}


def _num(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "-"


def _shown(name: str) -> str:
    """A name from a log (a node, an engine) in a table cell: on one line, markup shown."""
    return escape(visible(name, keep_newlines=False))


def print_audit(console: Console, summary: LogsSummary) -> None:
    table = Table(title="KV pool versus context length, from the engines' logs")
    for column in ("node", "engine", "role", "pool slots", "context", "ratio", "verdict"):
        right = column in ("pool slots", "context", "ratio")
        table.add_column(column, justify="right" if right else "left", no_wrap=True)
    for node in summary.nodes:
        j = node_json(node)
        ratio = f"{j['ratio']:.4f}" if j["ratio"] is not None else "-"
        table.add_row(
            _shown(j["node"]),
            _shown(j["engine"] or "-"),
            _shown(j["role"] or "-"),
            _num(j["pool_slots"]),
            _num(j["context_len"]),
            ratio,
            _VERDICT[j["fits"]],
        )
    console.print(table)
    for node in summary.misfits:
        where = node_json(node)["provenance"]
        sources = ", ".join(
            f"{k} at {where[k]}" for k in ("pool_slots", "context_len") if k in where
        )
        console.print(
            f"{visible(node.node, keep_newlines=False)}: {node.reason}"
            + (f" ({sources})" if sources else ""),
            markup=False,
        )
    console.print(
        f"{summary.lines_read:,} lines read in {len(summary.files)} files: "
        f"{summary.lines_parsed:,} parsed, {summary.lines_truncated:,} truncated, "
        f"{summary.lines_ignored:,} ignored; {len(summary.evidence):,} evidence lines "
        f"({_kinds(summary.evidence_by_kind)})",
        markup=False,
    )


def _kinds(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"
