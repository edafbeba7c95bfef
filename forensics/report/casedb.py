"""Read access to a case database for the report and the exports.

A stage that did not run leaves its tables missing. `stand_ins` creates empty TEMP copies of
them for the time of a `with` block, so every query reads them as empty, and reports which tables
were missing so the outputs can say so (an ingest killed before it stored the case counts as
missing its record, case_meta). Nothing is written to the case database itself."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from forensics.casedb.dbopen import open_database
from forensics.casedb.sql import ident, join, one_row, run, sql, tables
from forensics.casedb.standins import CREATE_TABLE, empty_stand_ins, schema_tables
from forensics.db import ingested, rows
from forensics.errors import CaseError


def open_case(db: Path) -> duckdb.DuckDBPyConnection:
    """Open an existing case database read-only."""
    if not db.is_file():
        raise CaseError(f"no case database at {db}; run `kvforensics ingest CASE --db {db}` first")
    try:
        return open_database(db, read_only=True)
    except duckdb.Error as exc:
        raise CaseError(f"{db} is not a readable DuckDB case database: {exc}") from exc


def _ingest_unfinished(con: duckdb.DuckDBPyConnection, present: set[str]) -> bool:
    """Whether the case's tables are those of an ingest that never finished (one killed before
    it stored the case: its tables are there, empty, and no ingest is recorded), which the
    report must call an ingest that has not run, not a case in which nothing happened."""
    if "case_meta" not in present or "requests" not in present or ingested(con):
        return False
    row = one_row(con.execute(sql("report/case_requests")))
    return row is not None and row[0] == 0


@contextmanager
def stand_ins(con: duckdb.DuckDBPyConnection) -> Iterator[list[str]]:
    """Create empty TEMP tables for the missing ones; yield their names (sorted); drop them."""
    present = set(tables(con, views=True))  # a ledger kept outside the case: kv_events a view
    with empty_stand_ins(con) as missing:
        yield sorted(missing + (["case_meta"] if _ingest_unfinished(con, present) else []))


# The ledger is never copied: it may be a view over parts kept outside the case database, or
# hundreds of millions of rows, and the report reads it through the analysis' tables.
NOT_COPIED = frozenset({"kv_events"})


def _shape_columns(con: duckdb.DuckDBPyConnection, name: str, ddl: str) -> list[str]:
    """The columns the current schema gives table `name` (from an empty TEMP table of it)."""
    shape = f"kvf_shape_{name}"
    con.execute(CREATE_TABLE.sub(f"CREATE TEMP TABLE IF NOT EXISTS {shape}", ddl))
    return [r["column_name"] for r in rows(con, "explain/shape", {"table": shape})]


@contextmanager
def column_stand_ins(
    con: duckdb.DuckDBPyConnection, names: tuple[str, ...] | None = None
) -> Iterator[dict[str, list[str]]]:
    """For each table of `names` (None: every table of the schema) that the case database has
    but without every column of the current schema (an older case database), a TEMP copy with
    those columns added as NULLs; yield {table: missing columns}; drop the copies and the
    shapes afterwards. Nothing is written to the case database itself."""
    ddl = schema_tables()
    present = set(tables(con))
    names = tuple(sorted(set(ddl) - NOT_COPIED)) if names is None else names
    ready = {r[0] for r in con.execute(sql("report/temp_tables")).fetchall()}
    missing: dict[str, list[str]] = {}
    made: list[str] = []
    try:
        for name in names:
            if name not in present or name not in ddl or name in ready:
                continue  # a table of the case, known to the schema, not given a copy already
            have = {r["column_name"] for r in rows(con, "explain/columns", {"table": name})}
            want = _shape_columns(con, name, ddl[name])
            made.append(f"kvf_shape_{name}")
            lacking = [c for c in want if c not in have]
            if not lacking:
                continue
            columns = join(ident(f"s.{c}") for c in lacking)
            run(
                con,
                "explain/column_stand_in",
                table=ident(name),
                shape=ident(f"kvf_shape_{name}"),
                columns=columns,
            )
            made.append(name)
            missing[name] = lacking
        yield missing
    finally:
        for name in made:
            run(con, "explain/drop_temp", table=ident(name))


def older_columns_note(lacking: dict[str, list[str]]) -> str:
    """What the report says of columns an older case database lacks (shown empty)."""
    cols = ", ".join(f"{table}.{c}" for table, names in sorted(lacking.items()) for c in names)
    return (
        f"This case database was made by an older version and lacks {cols}: they are shown "
        "empty. Run the stage that writes them again (analyze, reconstruct or replay) to fill "
        "them."
    )
