"""A partition task's local copy of a group of many small parts.

DuckDB spends a fixed time opening each part it reads, whatever the part holds: about 0.2 ms
to read one column of a part of a few hundred rows, and some 0.5 ms for the columns the sweep
reads. A partition task reads its partition four times (its request ids, its content hashes,
the sweep's input, and the events its pieces name), so an engine node whose ledger tap closed
a part every minute for two weeks (20,000 parts of a few hundred events) spent most of its
analysis opening the same files again. A task therefore reads such a group of parts once into
one local Parquet file (queries/ledger/copy_group.sql) and its views read that copy instead
(queries/ledger/view_copy.sql): each row as its part holds it, with its part's place in the
group and its row in the part, so the view types, numbers and filters it as it does the parts.

The copy lies in the task's spill folder (beside the case database on this machine, in the
system's temporary folder elsewhere) and is removed when the task ends; a stale one is removed
with the folder, as DuckDB's own spill is. A copy whose columns do not read back as the parts'
(a Parquet type that DuckDB writes another way) is not used: the parts are read instead.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb

from forensics.casedb.sql import ident, join, literal, literals, one_row, run, sql
from forensics.ledger.view import Copies, PartView, groups, schema_of

# A group of at least COPY_PARTS parts, holding fewer than COPY_MEAN_ROWS rows a part on
# average, is copied. Measured on a node of 20,000 parts of 267 events (one thread): the four
# passes over the parts cost 1.6 ms a part in all, the copy 0.5 ms a part (its read) and 0.23 µs
# a row (its write), and the passes over the copy about what they cost over one large part. So
# a copy pays where parts hold fewer than about 4,800 rows on average.
COPY_PARTS = 64
COPY_MEAN_ROWS = 4096

_COPY_NAME = "partition-copy-{}.parquet"


def wanted(group: list[PartView]) -> bool:
    """Whether a group of parts read in one scan is better copied first."""
    rows = sum(p.rows for p in group)
    return len(group) >= COPY_PARTS and rows < COPY_MEAN_ROWS * len(group)


def spill_folder(con: duckdb.DuckDBPyConnection) -> Path:
    """The folder the task's DuckDB spills into (forensics.casedb.dbopen.scratch_spill_folder)."""
    row = one_row(con.execute(sql("ledger/temp_directory")))
    assert row is not None and row[0], "a task's DuckDB has a spill folder"
    return Path(str(row[0]))


def copy_groups(con: duckdb.DuckDBPyConnection, parts: list[PartView]) -> Copies:
    """Copy each group of the partition's parts that is `wanted` into the task's spill folder;
    the copies' paths by their group's first rank."""
    todo = [(i, g) for i, g in enumerate(groups(parts)) if wanted(g)]
    if not todo:
        return {}
    folder = spill_folder(con)
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    copied: Copies = {}
    for i, group in todo:
        path = folder / _COPY_NAME.format(i)
        if _copied(con, group, path):
            copied[group[0].file.rank] = str(path)
        else:
            path.unlink(missing_ok=True)
    if made and not copied:  # the folder made for none (DuckDB makes it again if it spills)
        with contextlib.suppress(OSError):
            folder.rmdir()
    return copied


def _copied(con: duckdb.DuckDBPyConnection, group: list[PartView], path: Path) -> bool:
    """Copy the group's rows to `path`; whether the copy can stand for the parts. A copy that
    cannot be written (a full disk, a type DuckDB cannot write to Parquet) leaves the parts to
    be read as they are: a part that cannot be read then says so there."""
    files = literals(p.file.url for p in group)
    columns = join(ident(c) for c, _ in group[0].schema)
    try:
        run(con, "ledger/copy_group", files=files, columns=columns, copy=literal(str(path)))
    except duckdb.InterruptException:
        raise
    except duckdb.Error:
        return False
    return _reads_as(con, path, group[0])


def _reads_as(con: duckdb.DuckDBPyConnection, path: Path, first: PartView) -> bool:
    """Whether the copy's columns read back with the group's names and types."""
    rows = con.execute(sql("ledger/describe_part"), {"path": str(path)}).fetchall()
    types = {str(name): str(kind) for name, kind in rows}
    return schema_of(types) == first.schema


def remove_copies(copied: Copies) -> None:
    """Remove the task's copies, and their folder when nothing else is left in it (call once
    the task's DuckDB is closed: DuckDB leaves its spill folder when it holds other files)."""
    for path in map(Path, copied.values()):
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            path.parent.rmdir()
