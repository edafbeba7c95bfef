"""The short summary `investigate` prints at the end."""

from __future__ import annotations

from rich.console import Console

from forensics.ingest.report import print_ingest_summary
from forensics.investigate import InvestigateResult


def print_investigation(console: Console, result: InvestigateResult) -> None:
    stages = result.stages
    if "ingest" in stages and hasattr(result, "stages"):
        from forensics.ingest.result import FileCounts, IngestResult

        ingest = stages["ingest"]
        files = [FileCounts(**f) for f in ingest["files"]]
        skipped = [(s["path"], s["why"]) for s in ingest["skipped"]]
        print_ingest_summary(
            console,
            IngestResult(
                ingest["case_dir"],
                files,
                skipped,
                ingest["warnings"],
                ingest["unchanged"],
                ingest.get("notes", []),
            ),
        )
    for name, summary in stages.items():
        line = summary.get("headline")
        if line:
            console.print(f"{name}: {line}", markup=False)
    console.print("Wrote:")
    for path in result.written:
        console.print(f"  {path}", markup=False)
