"""Read one input file into the temp table `staged`: the contract's columns as text, one row per
record, with src_row, and parse_error/raw for records that do not parse.

The SQL is in queries/stage_*.sql. The only text composed here is the column projection, built
from the contract's own column names (never from file content) and quoted as identifiers."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import duckdb
import zstandard

from forensics.errors import InputError, MissingColumnError
from forensics.ingest.contract import TableContract
from forensics.ingest.discover import InputFile
from forensics.ingest.sqlrun import run_script
from forensics.resources import sql


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A quoted SQL string literal (only for file paths, where a parameter is not allowed)."""
    return "'" + text.replace("'", "''") + "'"


def _nulls(table: TableContract) -> str:
    return ", ".join(f"NULL::VARCHAR AS {ident(c)}" for c in table.names)


def _check_columns(f: InputFile, table: TableContract, found: list[str]) -> None:
    import difflib

    for column in table.required:
        if column not in found:
            near = difflib.get_close_matches(column, found, n=1, cutoff=0.6)
            raise MissingColumnError(f.rel, table.name, column, found, near[0] if near else None)


def _read_raw(con: duckdb.DuckDBPyConnection, f: InputFile, script: str) -> None:
    try:
        run_script(con, sql(script), {"path": str(f.path), "compression": f.compression or "none"})
    except duckdb.Error as exc:
        raise InputError(
            f"cannot read this {f.fmt} file: {exc}",
            path=f.rel,
            fix="check that the file is complete and in the format its name says",
        ) from exc


def _stage_text(con: duckdb.DuckDBPyConnection, f: InputFile, header_lines: int) -> None:
    run_script(con, sql("stage_rejects"), {"header_lines": header_lines})


def stage_csv(
    con: duckdb.DuckDBPyConnection, f: InputFile, table: TableContract, workdir: Path
) -> None:
    _read_raw(con, f, "stage_csv")
    found = [r[0] for r in con.execute(sql("describe_raw")).fetchall()]
    _check_columns(f, table, found)
    _stage_text(con, f, header_lines=1)
    projection = ", ".join(
        f"{ident(c)}::VARCHAR AS {ident(c)}" if c in found else f"NULL::VARCHAR AS {ident(c)}"
        for c in table.names
    )
    run_script(con, sql("stage_csv_rows").format(projection=projection, nulls=_nulls(table)), {})


def stage_jsonl(
    con: duckdb.DuckDBPyConnection, f: InputFile, table: TableContract, workdir: Path
) -> None:
    _read_raw(con, f, "stage_lines")
    _stage_text(con, f, header_lines=0)
    found = [r[0] for r in con.execute(sql("json_keys")).fetchall()]
    _check_columns(f, table, found)
    projection = ", ".join(f"vals[{i + 1}] AS {ident(c)}" for i, c in enumerate(table.names))
    paths = ['$."' + c + '"' for c in table.names]
    text = sql("stage_lines_rows").format(projection=projection, nulls=_nulls(table))
    run_script(con, text, {"paths": paths})


def stage_parquet(
    con: duckdb.DuckDBPyConnection, f: InputFile, table: TableContract, workdir: Path
) -> None:
    """Parquet is read in place with its own types. Parquet compresses inside the file; a
    whole-file .gz/.zst wrapper is unpacked into workdir first."""
    path = f.path
    if f.compression is not None:
        path = workdir / f"{abs(hash(f.rel))}.parquet"
        decompress_to(f.path, f.compression, path)
    try:
        described = con.execute(sql("describe_parquet"), {"path": str(path)})
        types = {r[0]: r[1] for r in described.fetchall()}
    except duckdb.Error as exc:
        raise InputError(f"cannot read this Parquet file: {exc}", path=f.rel,
                         fix="check that the file is complete Parquet") from exc
    _check_columns(f, table, list(types))
    projection = ", ".join(
        f"{ident(c) if c in types else 'NULL::VARCHAR'} AS {ident(c)}" for c in table.names
    )
    text = sql("stage_parquet_rows").format(projection=projection, path=literal(str(path)))
    run_script(con, text)


def decompress_to(source: Path, compression: str, target: Path) -> None:
    with source.open("rb") as raw, target.open("wb") as out:
        if compression == "gzip":
            with gzip.open(raw) as stream:
                shutil.copyfileobj(stream, out, 1 << 20)
        else:
            with zstandard.ZstdDecompressor().stream_reader(raw) as stream:
                shutil.copyfileobj(stream, out, 1 << 20)


STAGERS = {"csv": stage_csv, "jsonl": stage_jsonl, "parquet": stage_parquet}


def stage_file(
    con: duckdb.DuckDBPyConnection, f: InputFile, table: TableContract, workdir: Path
) -> None:
    """Make the temp relation `staged` for one file; workdir holds any unpacked copies."""
    STAGERS[f.fmt](con, f, table, workdir)
