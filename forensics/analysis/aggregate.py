"""Turn the sweep's pieces into the analysis tables, all in SQL (queries/analysis/*.sql).

exposures, violations and read_stats come from the pieces; exposure_tokens counts docs/DESIGN.md §6
token exposures per (receiver, node, leaker); affected_requests and affected_accounts join both
sides back to requests and accounts, cross-account only, ledger evidence first, screening
(`possible`) for what no ledger decides."""

from __future__ import annotations

from typing import TypedDict, cast

import duckdb

from forensics.analysis.codes import code_lists
from forensics.analysis.reasons import SUSPECT_REASONS
from forensics.casedb.sql import run_script, sql
from forensics.ledger.store import ledger_loaded

LEDGER_QUERIES = (
    "analysis/exposures",
    "analysis/violations",
    "analysis/read_stats",
    "analysis/exposure_tokens",
)
AFFECTED_QUERIES = ("analysis/affected_requests", "analysis/affected_accounts")


def prepare(con: duckdb.DuckDBPyConnection) -> None:
    """Create the analysis tables if missing and the one-row-per-request view of the log."""
    run_script(con, sql("schema/analysis"))
    run_script(con, sql("schema/work"))
    run_script(con, sql("schema/reconstruct"))
    run_script(con, sql("analysis/requests"), {"ledger_loaded": ledger_loaded(con)})


def ledger_tables(con: duckdb.DuckDBPyConnection, piece_events: bool = True) -> None:
    """The ledger tables from the pieces; piece_events False when analysis_piece_events was
    already filled (by the tasks that read a ledger kept outside the database)."""
    if piece_events:
        run_script(con, sql("analysis/piece_events"))
    for name in LEDGER_QUERIES:
        run_script(con, sql(name), code_lists())  # kinds and violations decoded by code


def affected_tables(con: duckdb.DuckDBPyConnection) -> None:
    bound = {"suspect_reasons": list(SUSPECT_REASONS)}
    for name in AFFECTED_QUERIES:
        run_script(con, sql(name), bound)


class LedgerSummary(TypedDict):
    """The ledger's own figures and the evidence each node was judged on: the columns of
    queries/analysis/summary.sql, in its order."""

    reads: int
    events: int
    ledger_nodes: int
    exposures_by_kind: dict[str, int]
    exposure_runs: int
    violations_by_kind: dict[str, int]
    uninitialised_slots: int
    screened_suspects: int
    screened_suspects_without_ledger: int
    possible_pairs: int
    reconstructed_pairs: int
    evidence_by_node: dict[str, str]  # node -> EvidenceLevel value
    evidence_notes: dict[str, str]  # node -> what is missing, in words
    ledger_holes: int
    accounts_by_confidence: dict[str, int]  # "<side> <Confidence value>" -> accounts
    cleared_findings: int


def summary(con: duckdb.DuckDBPyConnection) -> LedgerSummary:
    """The figures `analyze` prints: reads, exposures by kind, both sides, tokens, violations."""
    cur = con.execute(sql("analysis/summary"))
    names = [d[0] for d in cur.description]
    if names != list(LedgerSummary.__annotations__):
        raise RuntimeError(
            f"queries/analysis/summary.sql gives {names}; LedgerSummary names "
            f"{list(LedgerSummary.__annotations__)}: make them agree"
        )
    out = dict(zip(names, cur.fetchall()[0], strict=True))
    for key in ("exposures_by_kind", "violations_by_kind", "accounts_by_confidence"):
        out[key] = {k: int(v) for k, v in sorted((out.get(key) or {}).items())}
    for key in ("evidence_by_node", "evidence_notes"):
        out[key] = {str(k): str(v) for k, v in sorted((out.get(key) or {}).items())}
    return cast(
        LedgerSummary,
        {
            k: (int(v) if isinstance(v, int | float) and not isinstance(v, bool) else v)
            for k, v in out.items()
        },
    )
