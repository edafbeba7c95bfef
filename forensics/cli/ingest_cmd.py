"""`kvforensics ingest`: load a case folder into a case database."""

from __future__ import annotations

from pathlib import Path

import typer

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.progress import progress_reporter
from forensics.cli.ray_option import ledger_option, ray_option
from forensics.errors import UsageError
from forensics.ingest.load import ingest_case
from forensics.ingest.report import print_ingest_summary
from forensics.ledger.store import ExternalLedger


@app.command()
def ingest(
    case_dir: Path = typer.Argument(..., help="Case folder with requests, kv_events, nodes, ..."),
    db: Path = typer.Option(..., "--db", help="Case database to create or refresh (DuckDB)."),
    assume_utc: bool = typer.Option(
        False,
        "--assume-utc",
        help="Read timestamps without an offset as UTC instead of quarantining them.",
    ),
    ledger_external: str = ledger_option(),
    ray: str = ray_option(),
    follow_links: bool = typer.Option(
        False,
        "--follow-links",
        help="Read symbolic links in the case folder that lead outside "
        "it (by default they are skipped and listed).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
) -> None:
    """Load and validate a case folder into DuckDB; bad rows go to quarantine with a reason."""
    with progress_reporter(console, "ingest") as progress:
        if ray and not ledger_external:
            raise UsageError("--ray on ingest checks an external ledger: add --ledger-external")
        ledger = ExternalLedger(ledger_external, ray) if ledger_external else None
        result = ingest_case(
            case_dir,
            db,
            assume_utc=assume_utc,
            follow_links=follow_links,
            progress=progress,
            ledger=ledger,
        )
    if json_out:
        emit_json(result.to_json())
    else:
        print_ingest_summary(console, result)
    finish(result.rows_quarantined > 0)
