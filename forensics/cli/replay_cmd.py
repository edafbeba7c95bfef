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
        None,
        "--model",
        help="A local Hugging Face causal-LM folder, an org/name already in "
        "the local Hugging Face cache (never downloaded), or 'test' for the project's test "
        "model (default: 'test' when the case was served by it).",
    ),
    served_model: str = typer.Option(
        None,
        "--served-model",
        help="The request log's name for this model, when it differs "
        "from the org/name or folder name; only runs with the logged model raise confidence.",
    ),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when present), cpu or cuda."),
    device_map: str = typer.Option(
        None,
        "--device-map",
        help="auto: spread the model over every visible GPU "
        "(needs accelerate, part of the replay extra).",
    ),
    request: list[str] = typer.Option(
        None,
        "--request",
        help="Replay only this request id (repeatable; default: every "
        "suspect in exposures and screening).",
    ),
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
            run = run_case_replay(
                con,
                model,
                device,
                request or None,
                progress,
                device_map=device_map,
                served_model=served_model,
            )
    finally:
        con.close()
    summary = summarise(run)
    if json_out:
        emit_json(summary)
    else:
        _print(summary)
    counts = summary["verdicts"]
    finish(counts["confirmed"] + counts["cannot-replay"] > 0 or bool(summary["kept_confirmed"]))


def _print(summary: dict) -> None:
    table = Table(
        title=f"replay {summary['run_id']} with {summary['model'] or '(no model)'} "
        f"on {summary['device']}"
    )
    for column in ("request", "verdict", "logged model", "seconds", "tokens/s", "reason"):
        table.add_column(column)
    for r in summary["results"]:
        table.add_row(
            escape(r["request_id"]),
            r["verdict"],
            "yes" if r["model_matches"] else "no (not counted)",
            f"{r['seconds']:.2f}",
            str(r["tokens_per_s"] or ""),
            escape(r["reason"]),
        )
    console.print(table)
    console.print(escape(summary["headline"]))
