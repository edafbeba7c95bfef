"""Empty TEMP stand-ins for the tables of a case database that a stage which did not run would
have made, so that queries read them as empty; nothing is written to the case database."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from forensics.casedb.sql import ident, sql, statements, tables, template

# The DDL files whose tables the report and the exports read (each stage's own DDL).
SCHEMAS = ("schema/case", "schema/analysis", "schema/logs", "schema/replay", "schema/reconstruct")
CREATE_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS\s+(\w+)", re.IGNORECASE)


def schema_tables() -> dict[str, str]:
    """{table name: its CREATE statement} for every table the report may read."""
    found: dict[str, str] = {}
    for name in SCHEMAS:
        for statement in statements(sql(name)):
            match = CREATE_TABLE.search(statement)
            if match:
                found.setdefault(match.group(1), statement)
    return found


@contextmanager
def empty_stand_ins(con: duckdb.DuckDBPyConnection) -> Iterator[list[str]]:
    """Create empty TEMP tables for the schema's tables the case database lacks (and no TEMP
    table stands in for already); yield their names (sorted); drop them afterwards."""
    present = set(tables(con, views=True))  # a ledger kept outside the case: kv_events a view
    present |= {r[0] for r in con.execute(sql("report/temp_tables")).fetchall()}  # stood in
    ddl = schema_tables()
    missing = sorted(name for name in ddl if name not in present)
    for name in missing:
        con.execute(CREATE_TABLE.sub(f"CREATE TEMP TABLE IF NOT EXISTS {name}", ddl[name]))
    try:
        yield missing
    finally:
        for name in missing:
            con.execute(template(sql("report/drop_stand_in"), table=ident(name)))
