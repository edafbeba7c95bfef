"""Small Parquet parts of the ledger loaded several to a statement (forensics.ingest.batched)
give the tables a load of one part at a time gives: every event with its own part's name, row
and input order, every quarantined row under its own part, and each part's own counts. The
oracle is the load of one file at a time (batching switched off), on a case whose ledger is
cut into many small parts: bad rows in several parts of one batch, a part of another schema
between two runs, a compressed part and a large one (both loaded alone), two parts with a column
named as one the Parquet reader adds to each row (loaded alone too: the reader's would be
theirs)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.paths import SAMPLE

import forensics.ingest.batched as batched
from forensics.errors import InputError
from forensics.ingest.load import ingest_case
from forensics.ledger.store import ExternalLedger

SIZES = (50, 300, 700, 1_100, 2_000)  # rows per small part, in turn
LARGE = 30_000  # decode-1's last rows at most, a part of their own
SMALL = 20_000  # SMALL_ROWS in these tests: that part is loaded alone


def many_parts(root: Path) -> Path:
    """The sample with each node's ledger cut into small parts (sizes from SIZES in turn; the
    last decode-1 rows a part of its own, large enough to be loaded alone)."""
    case = root / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("kv_events"))
    out = case / "kv_events"
    out.mkdir()
    for part in sorted((SAMPLE / "kv_events").glob("*.parquet")):
        table = pq.read_table(part)
        node = part.name.split("-part-")[0]
        start, i = 0, 0
        while start < table.num_rows:
            n = SIZES[i % len(SIZES)]
            if node == "decode-1" and table.num_rows - start <= LARGE:
                n = table.num_rows - start  # one large part at the end
            piece = table.slice(start, n)
            if node == "decode-0" and i in (3, 4, 6):
                piece = _spoiled(piece, i)  # bad rows in three parts of one run
            if node == "decode-0" and i == 9:
                piece = piece.drop_columns(["content_hash"])  # another schema
            if node == "decode-0" and i in (12, 13):  # a column named as the reader's own
                piece = piece.append_column("file_index", pa.array([7] * len(piece), pa.int64()))
            path = out / f"{node}-part-{i:05d}.parquet"
            pq.write_table(piece, path)
            if node == "prefill-0" and i == 1:
                with path.open("rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                path.unlink()
            start, i = start + n, i + 1
    return case


def _spoiled(piece: pa.Table, i: int) -> pa.Table:
    """Rows the checks quarantine: a negative slot_start, an unknown op."""
    starts = piece["slot_start"].to_pylist()
    starts[1] = -5
    ops = piece["op"].to_pylist()
    ops[min(i, len(ops) - 1)] = "steal"
    piece = piece.set_column(
        piece.schema.get_field_index("slot_start"), "slot_start", pa.array(starts, pa.int64())
    )
    return piece.set_column(piece.schema.get_field_index("op"), "op", pa.array(ops, pa.string()))


TABLES = ("kv_events", "quarantine", "ingest_warnings", "input_files")


def rows_of(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Each table's rows in their stored order, the events in input order (a load of several
    threads may store a file's rows a little out of order; the columns that name when it was
    loaded left out)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for t in TABLES:
            cols = [
                c
                for (c,) in con.execute(
                    "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND "
                    "schema_name = 'main' AND column_name NOT LIKE '%_at' ORDER BY column_index",
                    [t],
                ).fetchall()
            ]
            select = ", ".join(f'"{c}"' for c in cols)
            order = "input_order" if t == "kv_events" else "rowid"  # events: by their key
            out[t] = con.execute(f'SELECT {select} FROM "{t}" ORDER BY {order}').fetchall()
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[list[str]]]:
    root = tmp_path_factory.mktemp("batched")
    case = many_parts(root)
    alone, together = root / "alone.duckdb", root / "together.duckdb"
    together_parts: list[list[str]] = []
    real = batched.load_batch

    def spy(con, batch, *args, **kwargs):  # type: ignore[no-untyped-def]
        together_parts.append([f.rel.split("/")[-1] for f in batch.files])
        return real(con, batch, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batched, "BATCHED_TABLES", frozenset())
        ingest_case(case, alone)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batched, "BATCH_FILES", 7)  # several batches to a node
        mp.setattr(batched, "SMALL_ROWS", SMALL)  # so that decode-1's last part is loaded alone
        mp.setattr("forensics.ingest.load.load_batch", spy)
        ingest_case(case, together)
    return alone, together, together_parts


def test_parts_loaded_together_give_the_tables_of_parts_loaded_alone(both) -> None:  # type: ignore[no-untyped-def]
    alone, together, batches = both
    assert len(batches) >= 10 and max(map(len, batches)) == 7  # batching took place
    batched_parts = {name for b in batches for name in b}
    for alone_part in (  # the large part, the compressed one, the one of another schema,
        "decode-1-part-00025.parquet",  # the two with a column named file_index
        "prefill-0-part-00001.parquet.gz",
        "decode-0-part-00009.parquet",
        "decode-0-part-00012.parquet",
        "decode-0-part-00013.parquet",
    ):
        assert alone_part not in batched_parts
    assert "decode-0-part-00008.parquet" in batched_parts  # its neighbours are batched
    assert "decode-0-part-00010.parquet" in batched_parts
    a, b = rows_of(alone), rows_of(together)
    for t in TABLES:
        assert a[t] == b[t], t
    assert len(a["kv_events"]) > 100_000
    assert len(a["quarantine"]) == 6  # two bad rows in each of three parts of a batch


def test_each_part_keeps_its_own_counts(both) -> None:  # type: ignore[no-untyped-def]
    _, together, _ = both
    con = duckdb.connect(str(together), read_only=True)
    try:
        counts = con.execute(
            "SELECT path, rows_read, rows_loaded, rows_quarantined FROM input_files "
            "WHERE path LIKE 'kv_events/decode-0-part-0000%' ORDER BY path"
        ).fetchall()
        per_file = dict(
            con.execute(
                "SELECT src_file, count(*) FROM kv_events "
                "WHERE src_file LIKE 'kv_events/decode-0%' GROUP BY src_file"
            ).fetchall()
        )
    finally:
        con.close()
    spoiled = {f"kv_events/decode-0-part-{i:05d}.parquet" for i in (3, 4, 6)}
    for path, read, loaded, quarantined in counts:
        assert read == SIZES[int(path[-13:-8]) % len(SIZES)]
        assert (quarantined, loaded) == ((2, read - 2) if path in spoiled else (0, read))
        assert per_file[path] == loaded


def test_a_damaged_part_in_a_batch_is_named(tmp_path: Path) -> None:
    """A part whose footer reads but whose pages do not fails the batch's load, and is named
    as a part loaded alone is named."""
    case = many_parts(tmp_path)
    victim = case / "kv_events" / "decode-0-part-00007.parquet"
    table = pq.read_table(victim)
    pq.write_table(table, victim, compression="zstd")
    data = bytearray(victim.read_bytes())
    for at in range(200, len(data) // 2):  # the column chunks, not the footer
        data[at] = 0x5A
    victim.write_bytes(bytes(data))
    assert pq.read_metadata(victim).num_rows == table.num_rows  # the footer still reads
    db = tmp_path / "case.duckdb"
    with pytest.raises(InputError) as raised:
        ingest_case(case, db)
    assert raised.value.path == "kv_events/decode-0-part-00007.parquet"
    assert "cannot read this Parquet file" in str(raised.value)
    assert not db.exists()  # the failed first ingest leaves no database


@pytest.mark.parametrize("cut", ["decode-0-part-00005.parquet", "decode-1-part-00002.parquet"])
def test_a_cut_part_among_small_ones_is_named(tmp_path: Path, cut: str) -> None:
    """A part cut short (no footer) among small parts: the parts' schemas and rows are read
    beside the ingest, so the cut part's own load names it (before, the failed read of the
    footers ended the ingest's transaction, and the next part was named instead)."""
    case = many_parts(tmp_path)
    victim = case / "kv_events" / cut
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    db = tmp_path / "case.duckdb"
    with pytest.raises(InputError) as raised:
        ingest_case(case, db)
    assert raised.value.path == f"kv_events/{cut}"
    assert "cannot read this Parquet file" in str(raised.value)
    assert "transaction" not in str(raised.value).lower()
    assert not db.exists()


def test_an_external_part_with_a_column_named_as_the_readers_is_refused(tmp_path: Path) -> None:
    """A ledger kept outside the case numbers each part's rows by the reader's file_index and
    file_row_number; a part's own column of either name (in any case) would stand in for them."""
    from support.samples import hive_sample

    case = hive_sample(tmp_path)
    (part,) = (case / "kv_events" / "node=decode-1").glob("*.parquet")
    table = pq.read_table(part)
    pq.write_table(table.append_column("File_Index", pa.array([0] * len(table), pa.int64())), part)
    with pytest.raises(InputError) as raised:
        ingest_case(case, tmp_path / "case.duckdb", ledger=ExternalLedger("kv_events"))
    assert raised.value.path == f"kv_events/node=decode-1/{part.name}"
    assert "'File_Index'" in str(raised.value)


@pytest.mark.parametrize("name", ["file_row_number", "FILE_ROW_NUMBER"])
def test_a_loaded_part_with_a_column_named_as_the_readers_row_number_is_refused(
    tmp_path: Path, name: str
) -> None:
    """A part loaded into the case is read with the reader's file_row_number, by which each
    row is named; a part's own column of that name (in any case) would stand in for it or make
    the read fail. It is refused, naming the part and the column, before anything is loaded."""
    from support.samples import hive_sample

    case = hive_sample(tmp_path)
    (part,) = (case / "kv_events" / "node=decode-1").glob("*.parquet")
    table = pq.read_table(part)
    pq.write_table(table.append_column(name, pa.array(range(len(table)), pa.int64())), part)
    db = tmp_path / "case.duckdb"
    with pytest.raises(InputError) as raised:
        ingest_case(case, db)
    assert raised.value.path == f"kv_events/node=decode-1/{part.name}"
    assert f"'{name}'" in str(raised.value)
    assert "rename or drop" in raised.value.fix
    assert not db.exists()
