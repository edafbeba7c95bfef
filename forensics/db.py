"""Open a case database with the project's settings, macros, schema and ledger view (the
settings themselves are in forensics.casedb.dbopen), and the catalog helpers every stage uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from forensics.casedb.dbopen import open_database
from forensics.casedb.sql import one_row, sql, tables
from forensics.ledger.store import attach

INPUT_TABLES = (
    "requests",
    "kv_events",
    "nodes",
    "accounts",
    "contents",
    "node_starts",
    "node_disagreements",
    "node_facts",
    "engine_evidence",
    "engine_counters",
    "log_files",
    "tap_reports",
)
BOOKKEEPING_TABLES = ("quarantine", "ingest_warnings", "input_files")


def connect(
    path: Path | str, *, read_only: bool = False, memory_limit: str | None = None
) -> duckdb.DuckDBPyConnection:
    """Connect, set UTC and the project's macros, create the input schema if missing, and make
    kv_events the view over a ledger kept outside the database when the case has one."""
    con = open_database(path, read_only=read_only, memory_limit=memory_limit)
    attach(con)
    return con


def ingested(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether an ingest into this case database finished (it records the case folder last)."""
    if "case_meta" not in tables(con):
        return False
    row = one_row(con.execute(sql("ingest/ingested")))
    return bool(row and row[0])


def rows(
    con: duckdb.DuckDBPyConnection,
    query: str,
    params: list[Any] | dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Run queries/<query>.sql with bound parameters; rows as dicts."""
    cursor = con.execute(sql(query), params or [])
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def derived_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Tables written by later stages (everything that is not an input or bookkeeping table)."""
    keep = set(INPUT_TABLES) | set(BOOKKEEPING_TABLES) | {"case_meta"}
    return [name for name in tables(con) if name not in keep]
