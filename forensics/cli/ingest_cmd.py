"""`kvforensics ingest`: load a case folder into a case database."""

from __future__ import annotations

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import AssumeUtc, CaseDir, Db, FollowLinks, Json, LedgerExternal, Ray
from forensics.cli.progress import progress_reporter
from forensics.errors import UsageError
from forensics.ingest.load import ingest_case
from forensics.ingest.report import print_ingest_summary
from forensics.ledger.store import ExternalLedger
from forensics.options import InvestigateOptions


@app.command()
def ingest(
    case_dir: CaseDir,
    db: Db,
    assume_utc: AssumeUtc = InvestigateOptions.assume_utc,
    ledger_external: LedgerExternal = None,
    ray: Ray = None,
    follow_links: FollowLinks = InvestigateOptions.follow_links,
    json_out: Json = False,
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
