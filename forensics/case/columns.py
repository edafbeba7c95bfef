"""Columns of an input file that are not in the contract: they are not loaded, and each gets
one warning (per table and column, naming the first file that has it and how many do), so that
a mis-named column (`contenthash` for `content_hash`) is seen rather than silently left out.

Every reader records the columns it found (`seen`, `seen_in_parts`) in a temporary table of the
ingest's connection; `warn_ignored` turns those not in the contract into ingest_warnings rows
once every file is read. `notes` gives them to the run summary and the report: each column that
may stand for a contract column on a line of its own, the others of a table together when they
are many (a gateway export with dozens of fields the contract does not use)."""

from __future__ import annotations

import difflib

import duckdb

from forensics.base.textsafe import visible
from forensics.case.contract import BY_NAME
from forensics.casedb.sql import run_script, sql


def start(con: duckdb.DuckDBPyConnection) -> None:
    """An empty record of the columns seen (a temporary table of this connection)."""
    run_script(con, sql("ingest/columns_seen_create"))


def seen(con: duckdb.DuckDBPyConnection, table: str, file: str, found: list[str]) -> None:
    """Record that `file`, an input of `table`, has the columns `found`."""
    seen_in_parts(con, table, {file: found})


def seen_in_parts(con: duckdb.DuckDBPyConnection, table: str, found: dict[str, list[str]]) -> None:
    """seen for many files at once (file -> its columns): one statement however many parts.
    (The rows go as list parameters: an Arrow table registered with the connection would have
    DuckDB load pandas, a second's start-up.)"""
    files = [f for f, columns in found.items() for _ in columns]
    if files:
        params = {
            "table_name": table,
            "files": files,
            "columns": [c for columns in found.values() for c in columns],
        }
        run_script(con, sql("ingest/columns_seen_insert"), params)


def warn_ignored(con: duckdb.DuckDBPyConnection) -> None:
    """One ingest_warnings row per table and column seen that is not in the table's contract."""
    seen_rows = con.execute(sql("ingest/columns_seen")).fetchall()
    warnings = [
        (table, first, column, ignored_reason(table, column, files, first_columns))
        for table, column, files, first, first_columns in seen_rows
        if column not in BY_NAME[table].names
    ]
    if warnings:
        names = ("tables", "files", "columns", "reasons")
        params = {name: [w[i] for w in warnings] for i, name in enumerate(names)}
        run_script(con, sql("ingest/columns_ignored"), params)


def notes(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The warnings of columns not loaded, as lines for a reader: those with a suggestion, and
    up to TOGETHER - 1 others of a table, each on its line; more others of a table on one."""
    by_table: dict[str, list[tuple[str, str]]] = {}
    lines = []
    for table, column, reason in con.execute(sql("ingest/columns_warned")).fetchall():
        if _SUGGESTS in reason:
            lines.append(reason)
        else:
            by_table.setdefault(table, []).append((column, reason))
    for table, others in by_table.items():
        if len(others) < TOGETHER:
            lines.extend(reason for _, reason in others)
            continue
        names = ", ".join(f"'{shown(c)}'" for c, _ in others[:NAMED])
        more = f" and {len(others) - NAMED:,} more" if len(others) > NAMED else ""
        lines.append(
            f"{len(others):,} columns are not among the {table} table's columns and were not "
            f"loaded: {names}{more} (one warning each in ingest_warnings)"
        )
    return lines


def shown(column: str) -> str:
    """A column's name as a message shows it: control characters as escapes, and cut after
    SHOWN_CHARS characters (ingest_warnings keeps the whole name)."""
    text = visible(column, keep_newlines=False)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


SHOWN_CHARS = 120
TOGETHER = 4  # a table's columns without a suggestion warned of on one line from this many
NAMED = 8  # of which this many are named there
_SUGGESTS = "; did you mean '"


def ignored_reason(table: str, column: str, files: int, first_columns: list[str]) -> str:
    """Why `column` of `table`'s input was not loaded, with the contract column it may stand
    for: the closest one that the first file holding it lacks (first_columns: its columns)."""
    where = f" (in {files:,} files, the first named here)" if files > 1 else ""
    missing = [c for c in BY_NAME[table].names if c not in first_columns]
    near = difflib.get_close_matches(column, missing, n=1, cutoff=0.6)
    fix = (
        f"{_SUGGESTS}{near[0]}'? Rename the column"
        if near
        else "; if it holds one of the table's columns, rename it to that column's name"
    )
    return (
        f"column '{shown(column)}' is not one of the {table} table's "
        f"columns and was not loaded{where}{fix}"
    )
