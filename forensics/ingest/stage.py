"""The ingest stage of `investigate`: load the case, write quarantine.csv."""

from __future__ import annotations

from typing import Any

from forensics.ingest.discover import discover
from forensics.ingest.load import ingest_into
from forensics.ledger.store import ExternalLedger
from forensics.pipeline import RunContext
from forensics.sql import sql


def _ledger(params: dict[str, Any]) -> ExternalLedger | None:
    location = params.get("ledger_external")
    return ExternalLedger(str(location), params.get("ray")) if location else None


def ingest_stage(ctx: RunContext) -> dict[str, Any]:
    result = ingest_into(
        ctx.con,
        ctx.case_dir,
        discover(ctx.case_dir, bool(ctx.params.get("follow_links", False))),
        assume_utc=bool(ctx.params.get("assume_utc", False)),
        follow_links=bool(ctx.params.get("follow_links", False)),
        progress=ctx.progress,
        ledger=_ledger(ctx.params),
    )
    quarantine = ctx.wrote(ctx.out_dir / "quarantine.csv")
    ctx.con.execute(sql("ingest/export_quarantine"), {"target": str(quarantine)})
    ctx.ingest = result
    return result.to_json()
