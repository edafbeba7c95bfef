"""The columns of an external ledger's parts: each part's columns and DuckDB types read from
its Parquet schema and checked against the kv_events contract (required columns, no case twins,
no column named as one the Parquet reader adds), and the projection of a part onto the
contract's columns."""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

from forensics.case.contract import (
    KV_EVENTS,
    READER_COLUMNS,
    refuse_case_twins,
    refuse_reader_column,
)
from forensics.casedb.sql import Fragment, ident, join, literal, sql, template
from forensics.errors import InputError, MissingColumnError, first_line
from forensics.ledger.external import LedgerFile
from forensics.ledger.storage import raise_storage_failure


def columns_of(con: duckdb.DuckDBPyConnection, f: LedgerFile) -> dict[str, str]:
    """The part's columns and their DuckDB types, in file order."""
    try:
        rows = con.execute(sql("ledger/describe_part"), {"path": f.url}).fetchall()
    except duckdb.Error as exc:
        raise_storage_failure(exc, f.url, "this part's schema")
        raise InputError(
            # a part read from its local copy (forensics.ledger.mirror) is named as itself
            f"cannot read this Parquet file: {first_line(exc).replace(f.url, f.rel)}",
            path=f.rel,
            fix="check that the file is complete Parquet",
        ) from exc
    return _with_contract(f, {str(r[0]): str(r[1]) for r in rows})


def schemas_of(
    con: duckdb.DuckDBPyConnection, files: list[LedgerFile]
) -> dict[str, dict[str, str]]:
    """columns_of each part (by name), from one read of the parts' Parquet schemas: a query
    per part cost about 1.1 ms, 22 s for a node of 20,000 parts. A part the schemas do not
    give plainly (none read, a column without a type, two columns of one name), or every part
    when they cannot be read together, is described by itself, which names a damaged part."""
    try:
        rows = con.execute(sql("ledger/part_schemas"), {"paths": [f.url for f in files]})
        by_file: dict[str, list[tuple[str, str | None, int | None]]] = {}
        for file_name, name, duckdb_type, children in rows.fetchall():
            by_file.setdefault(str(file_name), []).append((name, duckdb_type, children))
    except duckdb.Error:
        by_file = {}  # each part is described by itself, which names a damaged one
    out = {}
    for f in files:
        found = _top_level(by_file.get(f.url, []))
        out[f.rel] = columns_of(con, f) if found is None else _with_contract(f, found)
    return out


def _top_level(rows: list[tuple[str, str | None, int | None]]) -> dict[str, str] | None:
    """A part's top-level columns and their DuckDB types from its Parquet schema elements (in
    schema order: the root, then each element followed by its children); None when they do not
    give them plainly."""
    if not rows:
        return None
    (_, _, root), *elements = rows
    left = [int(root or 0)]  # elements still to come at each open level
    found: dict[str, str] = {}
    for name, duckdb_type, children in elements:
        if len(left) == 1:
            if duckdb_type is None:
                return None
            found[str(name)] = str(duckdb_type)
        left[-1] -= 1
        if children:
            left.append(int(children))
        while len(left) > 1 and left[-1] == 0:
            left.pop()
    # every element accounted for, and as many columns as the root has (none named twice)
    return found if left == [0] and len(found) == int(root or 0) else None


def _with_contract(f: LedgerFile, found: dict[str, str]) -> dict[str, str]:
    """found, once it holds the contract's required columns, no two columns whose names differ
    only in case, and no column named as one the Parquet reader adds, by which every read of
    the parts numbers and names the rows."""
    refuse_case_twins(f.rel, list(found))
    refuse_reader_column(
        f.rel,
        list(found),
        READER_COLUMNS,
        "its file's place in the scan, or its row in the "
        "file, by which a ledger kept outside the case numbers its events",
    )
    for column in KV_EVENTS.required:
        if column not in found and column != "node":  # node may come from the folder name
            import difflib

            near = difflib.get_close_matches(column, list(found), n=1, cutoff=0.6)
            raise MissingColumnError(
                f.rel, "kv_events", column, list(found), near[0] if near else None
            )
    return found


def projection(found: Iterable[str], node: str | None) -> Fragment:
    """The contract's columns from a part (NULL when absent; node from the folder when absent)."""
    out = []
    found = set(found)
    for c in KV_EVENTS.names:
        if c in found:
            value = ident(c)
        elif c == "node" and node is not None:
            value = literal(node)
        else:
            value = template("NULL::VARCHAR")
        out.append(template("{value} AS {name}", value=value, name=ident(c)))
    return join(out)
