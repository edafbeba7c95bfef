"""`kvforensics replay`: confirm suspects by re-running them through a model from the KV they
really read (needs the `replay` extra)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.progress import progress_reporter
from forensics.db import connect
from forensics.errors import CaseError


@app.command()
def replay(
    db: Path = typer.Option(..., "--db", help="Case database written by ingest and analyze."),
    model: str = typer.Option(
        None, "--model", help="A local Hugging Face causal-LM directory, or 'test' for the "
        "project's test model (default: 'test' when the case was served by it)."),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when present), cpu or cuda."),
    request: list[str] = typer.Option(
        None, "--request", help="Replay only this request id (repeatable; default: every "
        "suspect in exposures and screening)."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
) -> None:
    """Replay suspect receivers from the KV their decode read, and clean; store the verdicts
    (confirmed, not-reproduced, cannot-replay) and raise confirmed exposures to `confirmed`."""
    from forensics.investigate import check_replay_options
    from forensics.replay.stage import require_replay, run_case_replay, summarise

    check_replay_options(model, device, ("--model", "--device"))
    require_replay()
    if not db.is_file():
        raise CaseError(f"{db}: no case database here; create it with kvforensics ingest")
    con = connect(db)
    try:
        with progress_reporter(console, "replay") as progress:
            run = run_case_replay(con, model, device, request or None, progress)
    finally:
        con.close()
    summary = summarise(run)
    if json_out:
        emit_json(summary)
    else:
        _print(summary)
    counts = summary["verdicts"]
    finish(counts["confirmed"] + counts["cannot-replay"] > 0)


def _print(summary: dict) -> None:
    table = Table(title=f"replay with {summary['model'] or '(no model)'} on {summary['device']}")
    for column in ("request", "verdict", "seconds", "tokens/s", "reason"):
        table.add_column(column)
    for r in summary["results"]:
        table.add_row(escape(r["request_id"]), r["verdict"], f"{r['seconds']:.2f}",
                      str(r["tokens_per_s"] or ""), escape(r["reason"]))
    console.print(table)
    counts = summary["verdicts"]
    console.print(f"{counts['confirmed']} confirmed, {counts['not-reproduced']} not reproduced, "
                  f"{counts['cannot-replay']} cannot be replayed")
