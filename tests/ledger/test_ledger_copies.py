"""A partition task copies a group of many small parts into one local file and reads that
instead (forensics.ledger.copies). The copy holds each row as its part holds it, so the
analysis gives the loaded ledger's tables: on parts with quarantined rows, a part every row of
which is quarantined, an empty part, parts of another schema, text to trim, hostile request
ids. A copy that cannot be written or does not read back as the parts is not used, and no copy
outlives its task."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from support.cases import query
from support.ledgercases import check_case, split_decode0
from support.samples import differences, hive_sample, task_per_partition

import forensics.ledger.copies as copies
from forensics.analysis.tasks import by_node
from forensics.cli import run
from forensics.db import connect
from forensics.ledger.external import LedgerFile
from forensics.ledger.store import ledger_meta, part_views_of
from forensics.ledger.view import PartView, groups


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> Path:
    return check_case(tmp_path_factory.mktemp("check"))


@pytest.fixture(scope="module")
def loaded(case, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("loaded") / "loaded.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-load"]) == 1
    return db


def copy_everything(monkeypatch) -> list[int]:
    """Every group of parts copied; the number of copies each task made, in a list (a task per
    partition)."""
    task_per_partition(monkeypatch)
    monkeypatch.setattr(copies, "COPY_PARTS", 1)
    monkeypatch.setattr(copies, "COPY_MEAN_ROWS", 10**12)
    made: list[int] = []
    copy_groups = copies.copy_groups

    def counted(con, parts):  # type: ignore[no-untyped-def]
        copied = copy_groups(con, parts)
        made.append(len(copied))
        for path in copied.values():  # the copy is where the task spills
            assert Path(path).parent == copies.spill_folder(con)
        return copied

    monkeypatch.setattr("forensics.analysis.partitions.copy_groups", counted)
    return made


def partitions(db: Path) -> list[list[PartView]]:
    con = connect(db, read_only=True)
    try:
        meta = ledger_meta(con)
        assert meta is not None
        return by_node(part_views_of(con, meta))
    finally:
        con.close()


def left_beside(db: Path) -> list[Path]:
    return sorted(db.parent.glob(f"{db.name}.*"))


def analysed_copy(loaded_db: Path, tmp_path: Path) -> Path:
    out = tmp_path / "loaded.duckdb"
    shutil.copy(loaded_db, out)
    assert run(["analyze", "--db", str(out)]) in (0, 1)
    return out


def test_copies_give_the_loaded_analysis(case, loaded, tmp_path, monkeypatch) -> None:  # noqa: F811
    """decode-0 in 9 parts (quarantined rows, a part all quarantined, an empty part, a part of
    another schema, a hostile request id, requests missing from the log), decode-1 in 2."""
    made = copy_everything(monkeypatch)
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    assert run(["analyze", "--db", str(db)]) in (0, 1)
    assert sorted(made) == sorted(len(groups(p)) for p in partitions(db))  # every group
    assert max(made) > 2  # decode-0's parts, of two schemas and flags that alternate
    assert differences(analysed_copy(loaded, tmp_path), db) == {}
    assert query(db, "SELECT count(*) FROM exposures")[0][0] > 0
    assert left_beside(db) == []  # no copy, no spill folder left


def test_copies_of_typed_and_text_parts_give_the_loaded_analysis(tmp_path, monkeypatch) -> None:
    """Text to trim and to parse (timestamps with offsets, numbers with blanks), bad rows."""
    folder = hive_sample(tmp_path)
    split_decode0(folder)
    loaded_db = tmp_path / "l.duckdb"
    assert run(["ingest", str(folder), "--db", str(loaded_db), "--ledger-load"]) == 1
    made = copy_everything(monkeypatch)
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(folder), "--db", str(db), "--ledger-external"]) == 1
    assert run(["analyze", "--db", str(db), "--workers", "1"]) == 1
    assert sorted(made) == [1, 1, 1, 2]  # decode-0's typed part and its text part apart
    assert differences(analysed_copy(loaded_db, tmp_path), db) == {}
    assert left_beside(db) == []


@pytest.mark.parametrize("why", ["cannot write", "reads otherwise"])
def test_a_copy_that_cannot_stand_for_the_parts_is_not_used(
    case,  # noqa: F811
    loaded,  # noqa: F811
    tmp_path,
    monkeypatch,
    why,
) -> None:
    made = copy_everything(monkeypatch)
    if why == "cannot write":

        def failing(_con, name, **_parts):  # type: ignore[no-untyped-def]
            assert name == "ledger/copy_group"
            raise duckdb.IOException("No space left on device")

        monkeypatch.setattr(copies, "run", failing)
    else:
        monkeypatch.setattr(copies, "_reads_as", lambda *_: False)
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    assert run(["analyze", "--db", str(db)]) in (0, 1)
    assert made and sum(made) == 0
    assert differences(analysed_copy(loaded, tmp_path), db) == {}
    assert left_beside(db) == []


def test_an_interrupted_copy_is_not_taken_for_a_failed_one(monkeypatch, tmp_path) -> None:
    def interrupted(*_args, **_parts):  # type: ignore[no-untyped-def]
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    monkeypatch.setattr(copies, "run", interrupted)
    part = PartView(LedgerFile("/x", "x", "n", 0), (("seq", "BIGINT"),), False, False, 10)
    with pytest.raises(duckdb.InterruptException):
        copies._copied(duckdb.connect(), [part], tmp_path / "c.parquet")


def _group(parts: int, rows: int) -> list[PartView]:
    return [
        PartView(LedgerFile(f"/n/{i}", f"n/{i}", "n", i), (), False, False, rows)
        for i in range(parts)
    ]


def test_only_groups_of_many_small_parts_are_copied() -> None:
    assert copies.wanted(_group(20_000, 267))
    assert copies.wanted(_group(copies.COPY_PARTS, copies.COPY_MEAN_ROWS - 1))
    assert not copies.wanted(_group(copies.COPY_PARTS - 1, 10))
    assert not copies.wanted(_group(copies.COPY_PARTS, copies.COPY_MEAN_ROWS))
    assert not copies.wanted(_group(500, 1_000_000))


def test_copies_of_a_url_ledger_beside_an_odd_path(spoiled, tmp_path, monkeypatch) -> None:  # noqa: F811
    """Parts at an fsspec URL, the case database in a folder whose name holds a quote and
    non-ASCII letters (the copies lie in its spill folder beside it)."""
    fsspec = pytest.importorskip("fsspec")
    case_dir, loaded_db = spoiled
    fs = fsspec.filesystem("memory")
    for part in sorted((case_dir / "kv_events").rglob("*.parquet")):
        fs.pipe(f"/kvf-copies/{part.parent.name}/{part.name}", part.read_bytes())
    made = copy_everything(monkeypatch)
    db = tmp_path / "o'brien – été" / "url.duckdb"
    ledger = "memory://kvf-copies"
    assert run(["ingest", str(case_dir), "--db", str(db), "--ledger-external", ledger]) == 1
    assert run(["analyze", "--db", str(db)]) == 1
    assert made == [1, 1, 1, 1]  # a group a partition: decode-0's two parts are of one kind
    assert set(differences(loaded_db, db)) == {"input_files", "quarantine"}  # named by URL
    assert left_beside(db) == []
