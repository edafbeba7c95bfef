"""`kvforensics analyze`: the exposure analysis on an ingested case database."""

from __future__ import annotations

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import Db, Json, Ray, TtftFactor, WindowS, Workers
from forensics.cli.progress import run_on_case
from forensics.cli.summary import print_evidence_notes
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
    affected requests and accounts on both sides. Exit code 1 when anything was found, or
    when some requests without a ledger could not be looked at for stubs at all (nothing found
    there is no all-clear)."""
    from forensics.analysis.stage import analyze as run_analysis

    options = AnalysisOptions(window_s=window_s, ttft_factor=ttft_factor, workers=workers, ray=ray)
    summary = run_on_case(
        console, db, "analyze", lambda con, progress: run_analysis(con, options, progress)
    )
    if json_out:
        emit_json(summary)
    else:
        console.print(f"analyze: {summary['headline']}", markup=False)
        print_evidence_notes(console, "analyze", summary)
    finish(bool(summary["findings"] or summary["unexamined"]))
