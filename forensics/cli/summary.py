"""The short summary `investigate` prints at the end."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console

from forensics.base.textsafe import visible
from forensics.ingest.report import print_ingest_summary

if TYPE_CHECKING:  # the stages, numba among them, load when a command runs them
    from forensics.run.investigate import InvestigateResult


def print_investigation(console: Console, result: InvestigateResult) -> None:
    if result.ingest is not None:
        print_ingest_summary(console, result.ingest)
    for name, stage in result.results.items():
        if stage.headline:
            console.print(f"{name}: {stage.headline}", markup=False)
        print_evidence_notes(console, name, stage.summary)
    console.print("Wrote:")
    for path in result.written:
        console.print(f"  {path}", markup=False)


def print_evidence_notes(console: Console, name: str, summary: Mapping[str, Any]) -> None:
    """What the analysis could not see, one line per node judged without a complete ledger,
    with the reason and what would supply it."""
    for node, note in (summary.get("evidence_notes") or {}).items():
        shown = visible(node, keep_newlines=False)  # a node's name from the case, on one line
        console.print(f"{name}: {shown}: {note}", markup=False)
