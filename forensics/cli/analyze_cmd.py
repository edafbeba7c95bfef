"""`kvforensics analyze`: the exposure analysis on an ingested case database."""

from __future__ import annotations

from pathlib import Path

import typer

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.progress import progress_reporter
from forensics.cli.ray_option import ray_option
from forensics.errors import CaseError


@app.command()
def analyze(
    db: Path = typer.Option(..., "--db", help="Case database written by `kvforensics ingest`."),
    window_s: float = typer.Option(
        600.0,
        "--window-s",
        help="Screening: seconds before a suspect in which requests on the "
        "same decode node are possible leakers.",
    ),
    ttft_factor: float = typer.Option(
        10.0,
        "--ttft-factor",
        help="Screening: flag a time to first token this many times "
        "shorter than the node's normal prefill rate predicts.",
    ),
    workers: int = typer.Option(2, "--workers", help="Nodes swept in parallel."),
    ray: str = ray_option(),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
) -> None:
    """Rebuild what every KV read saw: exposures, ownership violations, screening, and the
    affected requests and accounts on both sides. Exit code 1 when anything was found."""
    from forensics.analysis.stage import analyze as run_analysis
    from forensics.db import connect

    if not db.is_file():
        raise CaseError(
            f"no case database at {db}; create it with `kvforensics ingest CASE --db {db}`"
        )
    con = connect(db)
    try:
        params = {"window_s": window_s, "ttft_factor": ttft_factor, "workers": workers, "ray": ray}
        with progress_reporter(console, "analyze") as progress:
            summary = run_analysis(con, params, progress)
    finally:
        con.close()
    if json_out:
        emit_json(summary)
    else:
        console.print(f"analyze: {summary['headline']}", markup=False)
    finish(bool(summary["findings"]))
