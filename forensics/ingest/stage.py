"""The ingest stage of `investigate`: load the case, write quarantine.csv."""

from __future__ import annotations

from forensics.case.discover import discover
from forensics.casedb.sql import sql
from forensics.context import RunContext, StageResult
from forensics.db import BOOKKEEPING_TABLES
from forensics.ingest.load import ingest_into
from forensics.ledger.default import choose_ledger


def ingest_stage(ctx: RunContext) -> StageResult:
    options = ctx.params
    ledger = choose_ledger(ctx.case_dir, options.ledger_external, options.ledger_load, options.ray)
    result = ingest_into(
        ctx.con,
        ctx.case_dir,
        discover(ctx.case_dir, options.follow_links),
        assume_utc=options.assume_utc,
        follow_links=options.follow_links,
        progress=ctx.progress,
        ledger=ledger,
    )
    quarantine = ctx.out_dir / "quarantine.csv"
    ctx.con.execute(sql("ingest/export_quarantine"), {"target": str(quarantine)})
    ctx.ingest = result
    return StageResult(
        summary=result.to_json(),
        findings=result.rows_quarantined > 0,
        tables=tuple(sorted(set(result.by_table()) | set(BOOKKEEPING_TABLES))),
        files=(quarantine,),
    )
