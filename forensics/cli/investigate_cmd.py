"""`kvforensics investigate`: every stage on a case folder, with a manifest."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.progress import progress_reporter
from forensics.cli.ray_option import ledger_option, ray_option
from forensics.cli.summary import print_investigation
from forensics.investigate import InvestigateOptions
from forensics.investigate import investigate as run_investigation


@app.command()
def investigate(
    case_dir: Path = typer.Argument(..., help="Case folder with requests, kv_events, nodes, ..."),
    out: Path = typer.Option(..., "--out", help="Output folder (created if missing)."),
    assume_utc: bool = typer.Option(
        False, "--assume-utc", help="Read timestamps without an offset as UTC."
    ),
    aware_at: str = typer.Option(
        None, "--aware-at", help="When the operator became aware (ISO-8601); sets notify_by."
    ),
    replay_model: str = typer.Option(
        None,
        "--replay-model",
        help="Model for replay: a local Hugging Face directory, or "
        "'test' (default: the test model when the case was served by it).",
    ),
    replay_device: str = typer.Option(
        "auto", "--replay-device", help="auto (CUDA when present), cpu or cuda."
    ),
    served_model: str = typer.Option(
        None,
        "--served-model",
        help="The request log's name for the replay model, when it "
        "differs from the org/name or folder name.",
    ),
    rules: str = typer.Option(
        None,
        "--rules",
        help="CSV of notification deadline rules that replace or add to the "
        "shipped ones (header: jurisdiction,notify_within_hours,authority_within_hours,basis).",
    ),
    ray: str = ray_option(),
    ledger_external: str = ledger_option(),
    follow_links: bool = typer.Option(
        False,
        "--follow-links",
        help="Read symbolic links in the case folder that lead outside "
        "it (by default they are skipped and listed).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
) -> None:
    """Run every stage on a case folder: ingest, analysis, exports, report, manifest. The
    outputs are built beside OUT and swapped in complete."""
    options = InvestigateOptions(
        assume_utc=assume_utc,
        aware_at=aware_at,
        replay_model=replay_model,
        replay_device=replay_device,
        served_model=served_model,
        rules=rules,
        follow_links=follow_links,
        ray=ray,
        ledger_external=ledger_external,
        command=["kvforensics", *sys.argv[1:]],
    )
    with progress_reporter(console, "investigate") as progress:
        result = run_investigation(case_dir, out, options, progress=progress)
    if json_out:
        emit_json(result.to_json())
    else:
        print_investigation(console, result)
    finish(result.findings)
