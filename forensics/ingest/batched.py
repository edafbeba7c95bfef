"""Small Parquet parts of the KV ledger loaded several to a statement.

A file is loaded by one statement (queries/ingest/insert.sql) with the ingest's validation nested
in it, and DuckDB plans that statement in 50 to 70 ms, what checking and writing 20,000 events
costs. A fleet's ledger of hundreds of nodes, or a tap that closes a part every few minutes, has
hundreds or thousands of small parts: 400 parts of 20,000 events took 27.9 s to insert, most of
it planning. Runs of consecutive Parquet parts of one schema (the same columns and types), each
under SMALL_ROWS rows, are therefore loaded together, up to BATCH_ROWS rows and BATCH_FILES
parts a statement. Each row keeps its own part's name and row and the input_order a part loaded
alone gives it, and each part's counts are its own: its rows read from its footer, its rows
quarantined counted in quarantine, the rest loaded (the sum checked against the rows the
statement inserted). A part that cannot be read is named, as when it is loaded alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from forensics.case import columns
from forensics.case.contract import OPS, TableContract, reader_column
from forensics.case.discover import InputFile
from forensics.case.result import FileCounts
from forensics.casedb.dbopen import open_database
from forensics.casedb.sql import Fragment, first_row, ident, literals, nested, run, sql, template
from forensics.errors import InputError, interrupted
from forensics.ingest.readers import parquet_projection, parquet_types

SMALL_ROWS = 1 << 18  # a part of fewer rows may be loaded with others
BATCH_ROWS = 1 << 20  # at most this many rows a statement (sorted in input order)
BATCH_FILES = 256  # and this many parts
BATCHED_TABLES = frozenset({"kv_events"})


@dataclass(frozen=True)
class Batch:
    """Parts loaded by one statement: one part alone (projection None: loaded as any file), or
    several of one projection, with the rows each holds."""

    files: list[InputFile]
    projection: Fragment | None = None
    rows: tuple[int, ...] = ()
    columns: tuple[str, ...] = ()  # the parts' columns (one schema)


def batches(
    files: list[InputFile],
    table: TableContract,
    rank: dict[str, int],
) -> list[Batch]:
    """The table's files, in order, as batches: runs of small Parquet parts of consecutive ranks
    and one schema together, every other file alone. A part whose schema or footer cannot be
    read is alone, and its load says why."""
    if table.name not in BATCHED_TABLES:
        return [Batch([f]) for f in files]
    small = _small_parts([f for f in files if f.fmt == "parquet" and f.compression is None])
    out: list[Batch] = []
    run_key: tuple[object, ...] | None = None
    for f in files:
        found = small.get(f.rel)
        key = None
        if found is not None:
            types, rows = found
            try:
                projection = parquet_projection(f, table, types)
            except InputError:  # loaded alone, which reports it
                found = None
            else:
                key = (tuple(types.items()), str(projection))
        last = out[-1] if out else None
        if (
            found is None
            or last is None
            or last.projection is None
            or key != run_key
            or rank[f.rel] != rank[last.files[-1].rel] + 1
            or sum(last.rows) + rows > BATCH_ROWS
            or len(last.files) >= BATCH_FILES
        ):
            if found is None:
                out.append(Batch([f]))
            else:
                out.append(Batch([f], projection, (rows,), tuple(types)))
            run_key = key
            continue
        out[-1] = Batch([*last.files, f], last.projection, (*last.rows, rows), last.columns)
    # a batch of one part is loaded as any file
    return [b if len(b.files) > 1 else Batch(b.files) for b in out]


def _small_parts(parts: list[InputFile]) -> dict[str, tuple[dict[str, str], int]]:
    """The columns and types, and the rows, of each part under SMALL_ROWS rows that has no
    column named as one the reader adds (forensics.case.contract.READER_COLUMNS), by name. Read
    by a connection of their own: a part that cannot be read fails a statement, which would end
    the ingest's transaction before the part's own load could name it."""
    if not parts:
        return {}
    con = open_database(":memory:", schema=False)
    try:
        try:
            found = con.execute(sql("ledger/part_rows"), {"paths": [str(f.path) for f in parts]})
            rows = dict(found.fetchall())
        except duckdb.Error:  # a damaged footer: every part is loaded alone, which names it
            return {}
        out = {}
        for f in parts:
            n = rows.get(str(f.path))
            if n is None or int(n) >= SMALL_ROWS:
                continue
            try:
                types = parquet_types(con, f, f.path)
            except InputError:
                continue
            if reader_column(list(types)) is None:  # else its own column would number the rows
                out[f.rel] = (types, int(n))
        return out
    finally:
        con.close()


def load_batch(
    con: duckdb.DuckDBPyConnection,
    batch: Batch,
    table: TableContract,
    identity: Callable[[InputFile], tuple[str, int]],
    params: dict[str, bool],
) -> list[FileCounts]:
    """Stage, validate and load a batch's parts in one statement; identity gives a part's
    (sha256, rank in input order). Each part's counts are its own."""
    assert batch.projection is not None and len(batch.files) > 1
    ranks = [identity(f)[1] for f in batch.files]
    assert ranks == list(range(ranks[0], ranks[0] + len(ranks))), "a batch's ranks run on"
    names = [f.rel for f in batch.files]
    columns.seen_in_parts(con, table.name, dict.fromkeys(names, list(batch.columns)))
    try:
        run(
            con,
            "ingest/stage_parquet_batch",
            projection=batch.projection,
            paths=literals(str(f.path) for f in batch.files),
            rank=template(str(int(ranks[0]))),
        )
        bound = {**params, "file_rank": 0, "ops": list(OPS), "files": names, "rank": ranks[0]}
        checks = nested(f"ingest/validate_{table.name}")
        insert = template(sql("ingest/insert_batch"), table=ident(table.name), checks=checks)
        inserted_row = first_row(con, insert, bound)
        inserted = int(inserted_row[0]) if inserted_row else 0
        quarantined: dict[str, int] = {}
        if inserted < sum(batch.rows):
            bound_q = {**bound, "table_name": table.name}
            run(con, "ingest/quarantine_batch", bound_q, checks=checks)
            per_file = con.execute(
                sql("ingest/quarantined_per_file"), {"table_name": table.name, "files": names}
            ).fetchall()
            quarantined = {str(name): int(n) for name, n in per_file}
    except duckdb.Error as exc:
        damaged = None if interrupted(exc) else _damaged(batch)
        if damaged is None:
            raise
        raise damaged from exc
    counts = [
        FileCounts(
            f.rel,
            table.name,
            identity(f)[0],
            f.path.stat().st_size,
            rows,
            rows - quarantined.get(f.rel, 0),
            quarantined.get(f.rel, 0),
        )
        for f, rows in zip(batch.files, batch.rows, strict=True)
    ]
    if sum(c.rows_loaded for c in counts) != inserted:
        raise RuntimeError(
            f"{inserted:,} rows inserted from {len(names)} parts ({names[0]} to {names[-1]}), "
            f"whose counts say {sum(c.rows_loaded for c in counts):,}"
        )
    return counts


def _damaged(batch: Batch) -> InputError | None:
    """For a batch whose load failed: the error of the first of its parts that cannot be read
    whole, named as a part loaded alone is; None when every part reads."""
    con = open_database(":memory:", schema=False)
    try:
        for f in batch.files:
            try:
                con.execute(sql("ingest/read_parquet_whole"), {"path": str(f.path)}).fetchall()
            except duckdb.Error as damaged:
                return InputError(
                    f"cannot read this Parquet file: {damaged}",
                    path=f.rel,
                    fix="check that the file is complete Parquet",
                )
    finally:
        con.close()
    return None
