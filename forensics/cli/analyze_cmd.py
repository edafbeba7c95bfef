"""`kvforensics analyze`: the exposure analysis on an ingested case database."""

from __future__ import annotations

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import Db, Json, Ray, TtftFactor, WindowS, Workers
from forensics.cli.progress import progress_reporter
from forensics.errors import CaseError
from forensics.options import AnalysisOptions


@app.command()
def analyze(
    db: Db,
    window_s: WindowS = AnalysisOptions.window_s,
    ttft_factor: TtftFactor = AnalysisOptions.ttft_factor,
    workers: Workers = AnalysisOptions.workers,
    ray: Ray = None,
    json_out: Json = False,
) -> None:
    """Rebuild what every KV read saw: exposures, ownership violations, screening, and the
    affected requests and accounts on both sides. Exit code 1 when anything was found."""
    from forensics.analysis.stage import analyze as run_analysis
    from forensics.db import connect

    options = AnalysisOptions(window_s=window_s, ttft_factor=ttft_factor, workers=workers, ray=ray)
    if not db.is_file():
        raise CaseError(
            f"no case database at {db}; create it with `kvforensics ingest CASE --db {db}`"
        )
    con = connect(db)
    try:
        with progress_reporter(console, "analyze") as progress:
            summary = run_analysis(con, options, progress)
    finally:
        con.close()
    if json_out:
        emit_json(summary)
    else:
        console.print(f"analyze: {summary['headline']}", markup=False)
    finish(bool(summary["findings"]))
