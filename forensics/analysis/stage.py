"""The analysis stage: order, sweep, aggregate, screen; then the files investigate writes.

`analyze(con, options)` works on an open case database and returns the summary;
`analyze_stage(ctx)` is the investigate stage, which also writes OUT/exposures.parquet (the
export stage then writes the notification lists from affected_accounts)."""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from dataclasses import asdict
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from forensics.analysis import aggregate, distributed, order
from forensics.analysis.budget import reset_limit
from forensics.analysis.evidence import evidence_phrase
from forensics.analysis.partitions import sweep_external
from forensics.analysis.screening import screen
from forensics.base.gcpause import collector_paused
from forensics.base.progress import ProgressFn, no_progress
from forensics.casedb.schema_docs import apply_comments, main_tables
from forensics.casedb.sql import one_row, run_script, sql, tables
from forensics.context import RunContext, StageResult
from forensics.errors import InputError
from forensics.figures import as_json, figures_line, headline_figures
from forensics.ledger.store import ledger_meta
from forensics.options import AnalysisOptions


class AnalysisSummary(aggregate.LedgerSummary):
    """What `analyze` returns, prints with --json and records under stages.analysis in
    manifest.json: the ledger's figures, then these, in this order."""

    figures: dict[str, Any]  # forensics.figures.headline_figures, times as ISO-8601 text
    findings: bool
    # requests without a ledger in which no stub could be looked for, and in which a stub of a
    # prompt that fits the pool could not (the headline figures', repeated here for --json)
    unscreened_requests: int
    unscreened_fitting_requests: int
    # either is not zero: nothing found there is not an all-clear, so the exit code is 1 as
    # for findings
    unexamined: bool
    headline: str
    parameters: dict[str, Any]  # the screening parameters and the workers


def analyze(
    con: duckdb.DuckDBPyConnection,
    options: AnalysisOptions | None = None,
    progress: ProgressFn = no_progress,
) -> AnalysisSummary:
    """Compute every analysis table in the case database in one transaction (a failure or kill
    leaves the previous tables); returns the summary figures. Python's cyclic garbage collector
    is off meanwhile (forensics.base.gcpause)."""
    _has_input(con)
    with collector_paused():
        con.begin()
        try:
            out = _analyze(con, options or AnalysisOptions(), progress)
            con.commit()
        except BaseException:
            con.rollback()
            with contextlib.suppress(duckdb.Error):  # the error that stopped it is the one to see
                reset_limit(con)  # the sweep lowers it; an aborted transaction refused it back
            raise
    return out


def _quarantined(con: duckdb.DuckDBPyConnection) -> str:
    """The quarantine's rows per file, with each file's first fault, as words ('' if none)."""
    found = con.execute(sql("analysis/quarantined_first")).fetchall()
    return "".join(
        f"; {n} rows of {file} were quarantined (the first: row {row}"
        + (f", {column} {value!r}" if column else "")
        + f": {reason})"
        for file, n, row, column, value, reason in found
    )


def _has_input(con: duckdb.DuckDBPyConnection) -> None:
    """A case without a request and without a ledger event stops: analysed, it would read as a
    case in which nothing happened (no finding, exit 0) where nothing was looked at."""
    if ledger_meta(con) is not None:  # checked by ingest; read here, it would be read twice
        return
    row = one_row(con.execute(sql("analysis/has_input")))
    if row is not None and row[0]:
        return
    quarantined = _quarantined(con)
    raise InputError(
        "nothing to analyse: the case holds no request (the requests table is empty) and no KV "
        "ledger event (kv_events is empty); a case in which nothing was loaded is not a case in "
        "which nothing happened" + quarantined,
        fix=(
            "mend the quarantined rows as each reason says and ingest again; "
            if quarantined
            else ""
        )
        + "give the case folder that holds the gateway log (requests.csv, .jsonl or .parquet) "
        "or the ledger (kv_events/...); ingest lists each file it skipped and each row it "
        "quarantined, with the reason",
    )


def _analyze(
    con: duckdb.DuckDBPyConnection, options: AnalysisOptions, progress: ProgressFn
) -> AnalysisSummary:
    warming = order.warming_up()  # the compiled code, loaded beside the SQL from here on
    aggregate.prepare(con)
    piece_events = sweep(con, options, progress, warming)
    progress("aggregate", 0, None)
    aggregate.ledger_tables(con, piece_events)
    screening = options.screening()
    screen(con, screening, ledger_scanned=True)
    aggregate.affected_tables(con)
    ledger = aggregate.summary(con)
    figures = as_json(headline_figures(con))
    con.execute(sql("report/cleanup"))
    findings = bool(
        ledger["exposure_runs"]
        or ledger["possible_pairs"]
        or ledger["reconstructed_pairs"]
        or sum(ledger["violations_by_kind"].values())
    )
    out: AnalysisSummary = {
        **ledger,
        "figures": figures,
        "findings": findings,
        "unscreened_requests": figures["unscreened_requests"],
        "unscreened_fitting_requests": figures["unscreened_fitting_requests"],
        "unexamined": bool(
            figures["unscreened_requests"] or figures["unscreened_fitting_requests"]
        ),
        "headline": "",
        "parameters": {},
    }
    out["headline"] = headline(out)
    run_script(con, sql("schema/views"))
    if {"node_starts", "node_disagreements"} <= set(tables(con)):
        run_script(con, sql("schema/views_nodes"))
    apply_comments(con, in_transaction=True)  # the tables the analysis created or replaced
    out["parameters"] = {**asdict(screening), "workers": options.workers}
    if options.ray is not None:
        out["parameters"]["engine"] = "ray"
    return out


def sweep(
    con: duckdb.DuckDBPyConnection,
    options: AnalysisOptions,
    progress: ProgressFn,
    warming: Future[None] | None = None,
) -> bool:
    """The per-node sweep on the local engine, or as Ray tasks when options.ray is set (an
    address, or "local" for an embedded Ray). Returns whether analysis_piece_events is still to
    be made from kv_events. warming: the compiled code being loaded (order.warming_up)."""
    workers, ray = options.workers, options.ray
    if ledger_meta(con) is not None:  # the ledger is kept outside the database
        sweep_external(con, ray, workers, progress, warming)
        return False
    if ray is None:
        order.sweep_case(con, workers, progress, warming)
        return True
    distributed.sweep_case_ray(con, ray, workers, progress, warming)
    return True


def headline(s: AnalysisSummary) -> str:
    """The analysis in one line: the evidence each node was judged on, what the ledger shows
    (runs by kind, violations), the case's headline figures (forensics.figures: what the
    notification lists hold, same-account exposures apart), and screening."""
    by_node = s.get("evidence_by_node") or {}
    f = s["figures"]
    parts = [f"evidence: {evidence_phrase(by_node)}"]
    if s["ledger_nodes"]:
        kinds = ", ".join(f"{k} {v}" for k, v in s["exposures_by_kind"].items()) or "none"
        parts.append(
            f"ledger: {s['reads']} reads, exposure runs: {kinds} "
            f"({f['cross_runs']} cross-account, {f['same_account_runs']} same-account"
            + (
                f", {f['unknown_account_runs']} of an unknown account"
                if f["unknown_account_runs"]
                else ""
            )
            + f"), {sum(s['violations_by_kind'].values())} violation runs"
            + (f", {s['ledger_holes']} known holes" if s.get("ledger_holes") else "")
        )
    else:
        parts.append("no KV ledger was provided, so no read is seen directly")
    by_level = s.get("accounts_by_confidence") or {}
    levels = ", ".join(f"{k} {v}" for k, v in by_level.items())
    parts.append(figures_line(f) + (f" (accounts: {levels})" if levels else ""))
    parts.append(
        f"{s['screened_suspects']} screened suspects "
        f"({s['screened_suspects_without_ledger']} without a complete ledger)"
    )
    if s.get("reconstructed_pairs"):
        parts.append(f"{s['reconstructed_pairs']} reconstructed cross-account pairs")
    if s.get("unscreened_requests"):
        parts.append(
            f"stubs could not be looked for in {s['unscreened_requests']} requests without a "
            "ledger (for them no pool size, no engine log and no cached tokens from an engine "
            "named as one that counts a stub as cached, and their times would not tell a stub "
            "apart)"
        )
    if s.get("unscreened_fitting_requests"):
        parts.append(
            f"a stub of a prompt that fits the pool could not be looked for in "
            f"{s['unscreened_fitting_requests']} requests without a ledger (neither cached "
            "tokens from an engine that counts a stub as cached (vLLM), a time model that would "
            "tell a stub apart, nor the engine's token counters for them)"
        )
    nodeless = (s.get("figures") or {}).get("nodeless_suspects")
    if nodeless:
        parts.append(
            f"{nodeless} suspects name no serving node in the request log: every "
            "request of the case is a possible source of what they read (log the node)"
        )
    sole = (s.get("figures") or {}).get("sole_node_requests")
    if sole:
        parts.append(
            f"{sole} requests name no node in the request log and are taken as served by the "
            "case's only engine node (if the deployment had more, list them in the nodes file)"
        )
    condensed = (s.get("figures") or {}).get("condensed_second_reads")
    if condensed:
        parts.append(
            f"{condensed} requests that may have been served a stub's pages "
            "by the prefix cache are listed with one counterpart each: their pairs with every "
            "leaker of the stub would number more than the analysis expands (prompts shared "
            "across accounts on the node); who is listed is the same, the counts are not full"
        )
    if s.get("cleared_findings"):
        parts.append(f"{s['cleared_findings']} findings cleared by positive evidence")
    return "; ".join(parts)


def analyze_stage(ctx: RunContext) -> StageResult:
    out = analyze(ctx.con, ctx.params.analysis(), ctx.progress)
    return StageResult(
        summary=out,
        headline=str(out["headline"]),
        findings=bool(out["findings"] or out["unexamined"]),
        tables=main_tables("schema/analysis"),
        files=(write_outputs(ctx.con, ctx.out_dir),),
    )


def write_outputs(con: duckdb.DuckDBPyConnection, out_dir: Path) -> Path:
    """OUT/exposures.parquet, sorted, so the same case gives a byte-identical file. (The
    notification lists are written from affected_accounts by the export stage.)"""
    path = out_dir / "exposures.parquet"
    pq.write_table(con.sql(sql("analysis/export_exposures")).to_arrow_table(), path)
    return path
