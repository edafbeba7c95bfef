"""Read access to a case database for the report and the exports.

A stage that did not run leaves its tables missing. `stand_ins` creates empty TEMP copies of
them for the time of a `with` block, so every query reads them as empty, and reports which tables
were missing so the outputs can say so. Nothing is written to the case database itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from forensics.errors import CaseError
from forensics.resources import resource_dir, sql

# The DDL files whose tables the report and the exports read; the first file defining a table
# wins, so a stage's own DDL file (when this installation has it) comes before the fallbacks.
SCHEMAS = (
    "schema",
    "schema_analysis",
    "schema_logs",
    "schema_replay",
    "schema_reconstruct",
    "report_optional_tables",
)
_COMMENT = re.compile(r"--.*$")
_CREATE = re.compile(r"CREATE TABLE IF NOT EXISTS\s+(\w+)", re.IGNORECASE)


def open_case(db: Path) -> duckdb.DuckDBPyConnection:
    """Open an existing case database read-only."""
    if not db.is_file():
        raise CaseError(f"no case database at {db}; run `kvforensics ingest CASE --db {db}` first")
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error as exc:
        raise CaseError(f"{db} is not a readable DuckDB case database: {exc}") from exc
    con.execute("SET TimeZone = 'UTC'")
    return con


def _statements(text: str) -> list[str]:
    """The statements of a DDL file, comments removed (a comment may contain ';')."""
    lines = [_COMMENT.sub("", line) for line in text.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def schema_tables() -> dict[str, str]:
    """{table name: its CREATE statement} for every table the report may read."""
    tables: dict[str, str] = {}
    folder = resource_dir("queries")
    for name in SCHEMAS:
        if not (folder / f"{name}.sql").is_file():
            continue
        for statement in _statements(sql(name)):
            match = _CREATE.search(statement)
            if match:
                tables.setdefault(match.group(1), statement)
    return tables


def present_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in con.execute(sql("case_tables")).fetchall()}


@contextmanager
def stand_ins(con: duckdb.DuckDBPyConnection) -> Iterator[list[str]]:
    """Create empty TEMP tables for the missing ones; yield their names (sorted); drop them."""
    present = present_tables(con)
    missing = sorted(name for name in schema_tables() if name not in present)
    for name in missing:
        con.execute(_CREATE.sub(f"CREATE TEMP TABLE IF NOT EXISTS {name}", schema_tables()[name]))
    try:
        yield missing
    finally:
        for name in missing:
            con.execute(f"DROP TABLE IF EXISTS temp.main.{name}")
