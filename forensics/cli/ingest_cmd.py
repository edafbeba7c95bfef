"""`kvforensics ingest`: load a case folder into a case database."""

from __future__ import annotations

from pathlib import Path

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import (
    AssumeUtc,
    CaseDir,
    Db,
    FollowLinks,
    Json,
    LedgerExternal,
    LedgerLoad,
    Ray,
)
from forensics.cli.progress import progress_reporter
from forensics.errors import UsageError
from forensics.ingest.load import ingest_case
from forensics.ingest.report import print_ingest_summary
from forensics.ledger.default import choose_ledger
from forensics.options import InvestigateOptions


def _check_db_apart(case_dir: Path, db: Path) -> None:
    """The case database outside the case folder: the evidence would otherwise hold a file the
    tool wrote (as forensics.run.investigate.check_apart refuses for OUT)."""
    if case_dir.is_dir() and db.resolve().is_relative_to(case_dir.resolve()):
        raise UsageError(
            f"--db {db} is inside the case folder {case_dir}: the case database would mix with "
            "the evidence; give a path outside the case folder"
        )


@app.command()
def ingest(
    case_dir: CaseDir,
    db: Db,
    assume_utc: AssumeUtc = InvestigateOptions.assume_utc,
    ledger_external: LedgerExternal = None,
    ledger_load: LedgerLoad = False,
    ray: Ray = None,
    follow_links: FollowLinks = InvestigateOptions.follow_links,
    json_out: Json = False,
) -> None:
    """Load and validate a case folder into DuckDB; bad rows go to quarantine with a reason."""
    _check_db_apart(case_dir, db)
    with progress_reporter(console, "ingest") as progress:
        ledger = choose_ledger(case_dir, ledger_external, ledger_load, ray)
        if ray and ledger is None:
            raise UsageError(
                "--ray on ingest checks a ledger read in place; this one is loaded (give "
                "--ledger-external, or drop --ledger-load)"
            )
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
