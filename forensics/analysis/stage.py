"""The analysis stage: order, sweep, aggregate, screen; then the files investigate writes.

`analyze(con, params)` works on an open case database and returns the summary;
`analyze_stage(ctx)` is the investigate stage, which also writes OUT/exposures.parquet (the
export stage then writes the notification lists from affected_accounts)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from forensics.analysis import aggregate, order
from forensics.analysis.screening import ScreeningParams, screen
from forensics.pipeline import RunContext
from forensics.progress import ProgressFn, no_progress
from forensics.resources import sql


def analyze(
    con: duckdb.DuckDBPyConnection,
    params: dict[str, Any] | None = None,
    progress: ProgressFn = no_progress,
) -> dict[str, Any]:
    """Compute every analysis table in the case database in one transaction (a failure or kill
    leaves the previous tables); returns the summary figures."""
    con.execute("BEGIN TRANSACTION")
    try:
        out = _analyze(con, params or {}, progress)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return out


def _analyze(
    con: duckdb.DuckDBPyConnection, params: dict[str, Any], progress: ProgressFn
) -> dict[str, Any]:
    aggregate.prepare(con)
    order.sweep_case(con, int(params.get("workers") or 2), progress)
    progress("aggregate", 0, None)
    aggregate.ledger_tables(con)
    screening = ScreeningParams.from_params(params)
    screen(con, screening)
    aggregate.affected_tables(con)
    out = aggregate.summary(con)
    out["findings"] = bool(
        out["exposure_runs"] or out["possible_pairs"] or sum(out["violations_by_kind"].values())
    )
    out["headline"] = headline(out)
    out["parameters"] = {**asdict(screening), "workers": int(params.get("workers") or 2)}
    return out


def headline(s: dict[str, Any]) -> str:
    kinds = ", ".join(f"{k} {v}" for k, v in s["exposures_by_kind"].items()) or "none"
    return (
        f"{s['reads']} reads; exposure runs: {kinds} ({s['same_or_unknown_account_runs']} not "
        f"cross-account); {s['tokens']} tokens "
        f"({s['cross_account_tokens']} cross-account); receiving {s['receiving_requests']} "
        f"requests / {s['receiving_accounts']} accounts, leaking {s['leaking_requests']} "
        f"requests / {s['leaking_accounts']} accounts; "
        f"{sum(s['violations_by_kind'].values())} violation runs; "
        f"{s['screened_suspects']} screened suspects"
    )


def analyze_stage(ctx: RunContext) -> dict[str, Any]:
    out = analyze(ctx.con, ctx.params, ctx.progress)
    ctx.wrote(write_outputs(ctx.con, ctx.out_dir))
    return out


def write_outputs(con: duckdb.DuckDBPyConnection, out_dir: Path) -> Path:
    """OUT/exposures.parquet, sorted, so the same case gives a byte-identical file. (The
    notification lists are written from affected_accounts by the export stage.)"""
    path = out_dir / "exposures.parquet"
    pq.write_table(con.sql(sql("analysis_export_exposures")).to_arrow_table(), path)
    return path
