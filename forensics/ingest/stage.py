"""The ingest stage of `investigate`: load the case, write quarantine.csv."""

from __future__ import annotations

from typing import Any

from forensics.context import RunContext, StageResult
from forensics.db import BOOKKEEPING_TABLES
from forensics.ingest.discover import discover
from forensics.ingest.load import ingest_into
from forensics.ingest.readers import literal
from forensics.ledger.store import ExternalLedger
from forensics.resources import sql


def _ledger(params: dict[str, Any]) -> ExternalLedger | None:
    location = params.get("ledger_external")
    return ExternalLedger(str(location), params.get("ray")) if location else None


def ingest_stage(ctx: RunContext) -> StageResult:
    result = ingest_into(
        ctx.con,
        ctx.case_dir,
        discover(ctx.case_dir, bool(ctx.params.get("follow_links", False))),
        assume_utc=bool(ctx.params.get("assume_utc", False)),
        follow_links=bool(ctx.params.get("follow_links", False)),
        progress=ctx.progress,
        ledger=_ledger(ctx.params),
    )
    quarantine = ctx.out_dir / "quarantine.csv"
    ctx.con.execute(sql("export_quarantine").replace("$target", literal(str(quarantine))))
    ctx.ingest = result
    return StageResult(
        summary=result.to_json(),
        findings=result.rows_quarantined > 0,
        tables=tuple(sorted(set(result.by_table()) | set(BOOKKEEPING_TABLES))),
        files=(quarantine,),
    )
