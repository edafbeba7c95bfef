"""The case database explains itself: every table and column carries a COMMENT, taken from the
schema files (queries/schema/*.sql), the one place where tables are described.

In a schema file, the comment lines right above `CREATE TABLE IF NOT EXISTS name (` describe the
table, and the comment at the end of a column's line (continued on comment-only lines below it)
describes the column. `apply_comments` writes them onto the tables that exist; stages call it
after they create or replace tables."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

import duckdb

from forensics.casedb.sql import ident, literal, relations, sql, template

# The schema files, in the order their tables are created.
SCHEMA_FILES = (
    "schema/case",
    "schema/logs",
    "schema/analysis",
    "schema/replay",
    "schema/work",
    "schema/reconstruct",
)
_CREATE = re.compile(r"^CREATE TABLE IF NOT EXISTS\s+(?:(\w+)\.)?(\w+)\s*\(", re.IGNORECASE)
_COLUMN = re.compile(r'^\s+"?(\w+)"?\s+[A-Z][^-]*?(?:--\s*(.*))?$')
_CONTINUED = re.compile(r"^\s+--\s*(.*)$")


@dataclass
class TableDoc:
    schema: str
    name: str
    comment: str
    columns: dict[str, str] = field(default_factory=dict)


def parse(text: str) -> list[TableDoc]:
    """The tables of one schema file with their comments."""
    docs: list[TableDoc] = []
    above: list[str] = []
    current: TableDoc | None = None
    last = ""
    for line in text.splitlines():
        if current is None:
            match = _CREATE.match(line)
            if match:
                current = TableDoc(match.group(1) or "main", match.group(2), " ".join(above))
                docs.append(current)
            elif line.startswith("--"):
                above.append(line[2:].strip())
            else:
                above = []
            continue
        if line.startswith(")"):
            current, above, last = None, [], ""
            continue
        continued = _CONTINUED.match(line)
        if continued and last:
            current.columns[last] = f"{current.columns[last]} {continued.group(1)}".strip()
            continue
        column = _COLUMN.match(line)
        if column:
            last = column.group(1)
            current.columns[last] = (column.group(2) or "").strip()
    return docs


@cache
def documented() -> dict[tuple[str, str], TableDoc]:
    """{(schema, table): its documentation} from every schema file; the first file wins."""
    out: dict[tuple[str, str], TableDoc] = {}
    for name in SCHEMA_FILES:
        for doc in parse(sql(name)):
            out.setdefault((doc.schema, doc.name), doc)
    return out


def main_tables(schema_file: str) -> tuple[str, ...]:
    """The tables a schema file creates in the main schema (those a stage writes), sorted."""
    return tuple(sorted(doc.name for doc in parse(sql(schema_file)) if doc.schema == "main"))


def apply_comments(con: duckdb.DuckDBPyConnection, *, in_transaction: bool = False) -> int:
    """COMMENT ON every documented table and column that exists and does not carry its comment
    yet; returns the number of comments set. All in one transaction of its own, unless the
    caller holds one (in_transaction: DuckDB aborts an open transaction on a nested BEGIN)."""
    tables = {(r.schema, r.name): r.comment for r in relations(con) if not r.view}
    columns: dict[tuple[str, str], dict[str, str | None]] = {}
    for schema, table, column, comment in con.execute(sql("schema/docs_columns")).fetchall():
        columns.setdefault((schema, table), {})[column] = comment
    statements = []
    for key, doc in documented().items():
        if key not in tables:
            continue
        target = ident(f"{doc.schema}.{doc.name}")
        if doc.comment and tables[key] != doc.comment:
            statements.append(
                template(sql("schema/docs_table"), table=target, text=literal(doc.comment))
            )
        for column, text in doc.columns.items():
            if text and column in columns.get(key, {}) and columns[key][column] != text:
                statements.append(
                    template(
                        sql("schema/docs_column"),
                        table=target,
                        column=ident(column),
                        text=literal(text),
                    )
                )
    if not statements:
        return 0
    own = not in_transaction  # one transaction for all of them (each alone would be a commit)
    if own:
        con.begin()
    try:
        for statement in statements:
            con.execute(statement)
    except BaseException:
        if own:
            con.rollback()
        raise
    if own:
        con.commit()
    return len(statements)
