"""The ingest stage of `investigate`: load the case, write quarantine.csv."""

from __future__ import annotations

from typing import Any

from forensics.ingest.discover import discover
from forensics.ingest.load import ingest_into
from forensics.ingest.readers import literal
from forensics.ledger.store import ExternalLedger
from forensics.pipeline import RunContext
from forensics.resources import sql


def ingest_stage(ctx: RunContext) -> dict[str, Any]:
    options = ctx.params
    location = options.ledger_external
    result = ingest_into(
        ctx.con,
        ctx.case_dir,
        discover(ctx.case_dir, options.follow_links),
        assume_utc=options.assume_utc,
        follow_links=options.follow_links,
        progress=ctx.progress,
        ledger=ExternalLedger(location, options.ray) if location else None,
    )
    quarantine = ctx.wrote(ctx.out_dir / "quarantine.csv")
    ctx.con.execute(sql("export_quarantine").replace("$target", literal(str(quarantine))))
    ctx.ingest = result
    return result.to_json()
