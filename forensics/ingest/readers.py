"""Read one input file into the temp table `staged`: the contract's columns as text, one row per
record, with src_row, and parse_error/raw for records that do not parse.

The SQL is in queries/ingest/stage_*.sql. The only text composed here is the column projection,
built with forensics.casedb.sql.template from the contract's own column names (never from file
content), quoted as identifiers."""

from __future__ import annotations

from pathlib import Path

import duckdb

from forensics.case import columns
from forensics.case.contract import TableContract, refuse_reader_column
from forensics.case.discover import InputFile
from forensics.case.expansion import check_expansion
from forensics.casedb.dbopen import memory_limit_bytes
from forensics.casedb.sql import Fragment, ident, join, literal, run, run_script, sql, template
from forensics.errors import InputError, MissingColumnError, first_line
from forensics.ingest.integrity import Scan, scan_file, text_blocks

_NULL = template("NULL::VARCHAR")


def _column(expression: Fragment, name: str) -> Fragment:
    return template("{expression} AS {name}", expression=expression, name=ident(name))


def _nulls(table: TableContract) -> Fragment:
    return join(_column(_NULL, c) for c in table.names)


def _check_columns(f: InputFile, table: TableContract, found: list[str]) -> None:
    import difflib

    for column in table.required:
        if column not in found:
            near = difflib.get_close_matches(column, found, n=1, cutoff=0.6)
            raise MissingColumnError(f.rel, table.name, column, found, near[0] if near else None)


def _read_raw(
    con: duckdb.DuckDBPyConnection, f: InputFile, script: str, columns: dict[str, str] | None = None
) -> None:
    params: dict[str, object] = {"path": str(f.path), "compression": f.compression or "none"}
    if columns is not None:
        params["columns"] = columns
    try:
        run_script(con, sql(script), params)
    except duckdb.Error as exc:
        raise InputError(
            f"cannot read this {f.fmt} file: {first_line(exc)}",
            path=f.rel,
            fix="check that the file is complete and in the format its name says",
        ) from exc


def _stage_text(con: duckdb.DuckDBPyConnection, header_lines: int) -> None:
    run_script(con, sql("ingest/stage_rejects"), {"header_lines": header_lines})


def stage_csv(
    con: duckdb.DuckDBPyConnection, f: InputFile, table: TableContract, _workdir: Path
) -> Scan | None:
    scan = scan_file(f)
    header = scan.header
    found = header_names(header)
    _check_columns(f, table, found)
    columns.seen(con, table.name, f.rel, found)
    _read_raw(con, f, "ingest/stage_csv", dict.fromkeys(found, "VARCHAR"))
    _stage_text(con, header_lines=1)
    projection = join(
        _column(template("{c}::VARCHAR", c=ident(c)) if c in found else _NULL, c)
        for c in table.names
    )
    run(con, "ingest/stage_csv_rows", projection=projection, nulls=_nulls(table))
    return scan


def header_names(header: list[str]) -> list[str]:
    """The CSV header's names as the reader binds them: without blanks around them (as a
    header written `request_id, account_id` has; values are trimmed too), and a blank one (a
    trailing comma, an empty spreadsheet heading) labelled by its place, '(blank header field
    N)', never a name that another column of the header has."""
    header = [name.strip() for name in header]
    taken = {name.casefold() for name in header}
    found = []
    for i, name in enumerate(header):
        if not name:
            name = f"(blank header field {i + 1})"
            while name.casefold() in taken:
                name += "'"
            taken.add(name.casefold())
        found.append(name)
    return found


def stage_jsonl(
    con: duckdb.DuckDBPyConnection, f: InputFile, table: TableContract, _workdir: Path
) -> Scan | None:
    scan = scan_file(f)
    _read_raw(con, f, "ingest/stage_lines")
    _stage_text(con, header_lines=0)
    run_script(con, sql("ingest/stage_lines_chunks"), {"chunk_bytes": JSON_CHUNK_BYTES})
    chunks = [c for (c,) in con.execute(sql("ingest/stage_lines_chunk_list")).fetchall()]
    found = sorted(
        {
            k
            for c in chunks
            for (k,) in con.execute(sql("ingest/json_keys"), {"chunk": c}).fetchall()
        }
    )
    _check_columns(f, table, found)
    columns.seen(con, table.name, f.rel, found)
    projection = join(_column(template(f"vals[{i + 1}]"), c) for i, c in enumerate(table.names))
    paths = ['$."' + c + '"' for c in table.names]
    scalar = [c.name for c in table.columns if c.kind != "ids"]
    scalar_paths = ['$."' + c + '"' for c in scalar]
    for chunk in chunks:
        params = {"paths": paths, "scalar_paths": scalar_paths, "chunk": chunk}
        run_script(con, sql("ingest/stage_lines_parse"), params)
    run(
        con,
        "ingest/stage_lines_rows",
        {"scalar_names": scalar},
        projection=projection,
        nulls=_nulls(table),
    )
    return scan


# JSON Lines are parsed in chunks of about this much text (queries/ingest/stage_lines_chunks.sql):
# a chunk's parsed documents take several times its size while they are worked on.
JSON_CHUNK_BYTES = 16 << 20


def stage_parquet(
    con: duckdb.DuckDBPyConnection, f: InputFile, table: TableContract, workdir: Path
) -> Scan | None:
    """Parquet is read in place with its own types. Parquet compresses inside the file; a
    whole-file .gz/.zst wrapper is unpacked into workdir first."""
    path = f.path
    if f.compression is not None:
        path = workdir / f"{abs(hash(f.rel))}.parquet"
        decompress_to(f, path)
    types = parquet_types(con, f, path)
    projection = parquet_projection(f, table, types)
    columns.seen(con, table.name, f.rel, list(types))
    run(con, "ingest/stage_parquet_rows", projection=projection, path=literal(str(path)))
    return None


def parquet_types(con: duckdb.DuckDBPyConnection, f: InputFile, path: Path) -> dict[str, str]:
    """The Parquet file's columns and their types (path: the file, or its unpacked copy), once
    its footer reads and its values decoded would not exceed the memory limit many times over
    what the file holds (forensics.case.expansion)."""
    try:
        described = con.execute(sql("ingest/describe_parquet"), {"path": str(path)})
        types = {r[0]: r[1] for r in described.fetchall()}
    except duckdb.Error as exc:
        raise InputError(
            f"cannot read this Parquet file: {first_line(exc)}",
            path=f.rel,
            fix="check that the file is complete Parquet",
        ) from exc
    check_expansion(f.rel, path, memory_limit_bytes(con))
    return types


def parquet_projection(f: InputFile, table: TableContract, types: dict[str, str]) -> Fragment:
    """The staged columns of a Parquet file of these columns and types, once the contract's
    checks of them pass (InputError naming the file otherwise)."""
    refuse_reader_column(  # DuckDB would bind the reader's row number to it, or refuse both
        f.rel,
        list(types),
        ("file_row_number",),
        "its row in the file, by which ingest names every row it loads",
    )
    _check_columns(f, table, list(types))
    _check_scalar_types(f, table, types)
    return join(_column(ident(c) if c in types else _NULL, c) for c in table.names)


def _check_scalar_types(f: InputFile, table: TableContract, types: dict[str, str]) -> None:
    """A nested Parquet column (struct, list, map) where the contract wants one value stops."""
    for column in table.columns:
        kind = types.get(column.name, "")
        nested = kind.endswith("]") or kind.startswith(("STRUCT", "MAP", "UNION"))
        if nested and column.kind != "ids":
            raise InputError(
                f"column '{column.name}' is of the nested type {kind}; the contract wants one "
                "value per row",
                path=f.rel,
                fix="write the column as a plain value",
            )


def decompress_to(f: InputFile, target: Path) -> None:
    """Unpack a whole-file .gz/.zst wrapper; InputError naming the file when it is cut short."""
    with target.open("wb") as out:
        for block in text_blocks(f, lines=False):
            out.write(block)


STAGERS = {"csv": stage_csv, "jsonl": stage_jsonl, "parquet": stage_parquet}


def stage_file(
    con: duckdb.DuckDBPyConnection, f: InputFile, table: TableContract, workdir: Path
) -> Scan | None:
    """Make the temp relation `staged` for one file; workdir holds any unpacked copies. Returns
    the scan of a text file (its physical records), None for Parquet."""
    return STAGERS[f.fmt](con, f, table, workdir)
