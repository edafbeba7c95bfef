"""The external ledger's check reads a node's parts in batches (forensics.ledger.check): what it
records (per-file counts, quarantine, warnings, each part's facts) is what the loaded ledger's
ingest of the same case gives, part by part, however the parts fall into batches; the batches
are runs of one schema within their bounds; and a damaged part in a batch is named."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.cases import query
from support.interrupts import watching
from support.ledgercases import (
    LOADED,
    RECORDED,
    check_case,
)
from support.samples import differences, edit_part, hive_sample

import forensics.ledger.check as check
import forensics.ledger.store as store
from forensics.cli import run
from forensics.ledger.external import LedgerFile
from forensics.ledger.view import PartView, groups

# What ingest records of each file, quarantine and warnings: both ways the same.
RECORDS = (
    "SELECT path, table_name, sha256, bytes, rows_read, rows_loaded, rows_quarantined "
    "FROM input_files ORDER BY ALL",
    'SELECT table_name, file, "row", "column", "value", reason FROM quarantine ORDER BY ALL',
    'SELECT table_name, file, "row", "column", "value", reason FROM ingest_warnings ORDER BY ALL',
)


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> Path:
    return check_case(tmp_path_factory.mktemp("check"))


@pytest.fixture(scope="module")
def loaded(case, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("loaded") / "loaded.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-load"]) == 1
    return db


def _reads(monkeypatch) -> Counter:
    """Count the batch reads per node."""
    reads: Counter = Counter()
    read = check._read_batch

    def counted(con, batch, columns, assume_utc):
        reads[batch[0].node] += 1
        return read(con, batch, columns, assume_utc)

    monkeypatch.setattr(check, "_read_batch", counted)
    return reads


@pytest.mark.parametrize(
    ("rows", "parts", "decode0_reads"),
    [
        (check.BATCH_ROWS, check.BATCH_PARTS, 3),  # cut at the part of another schema only
        (check.BATCH_ROWS, 2, 6),  # [0 1] [2 3] [4] [5] [6 7] [8]
        (10_000, check.BATCH_PARTS, 7),  # [0] [1 2 3] [4] [5] [6] [7] [8]
        (1, 1, 9),  # each part alone
    ],
    ids=["default", "two-parts", "rows", "alone"],
)
def test_a_batched_check_records_what_the_loaded_ingest_does(
    case, loaded, tmp_path, monkeypatch, rows, parts, decode0_reads
) -> None:
    monkeypatch.setattr(check, "BATCH_ROWS", rows)
    monkeypatch.setattr(check, "BATCH_PARTS", parts)
    reads = _reads(monkeypatch)
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    assert reads["decode-0"] == decode0_reads
    for text in RECORDS:
        assert query(db, text) == query(loaded, text), text
    recorded = query(db, RECORDED)
    assert [r for r in recorded if r[1]] == query(loaded, LOADED)  # the parts with kept rows
    none_kept = [r for r in recorded if not r[1]]  # all quarantined, and the empty part
    assert [r[0].rsplit("/", 1)[1] for r in none_kept] == [
        "decode-0-part-002.parquet",
        "decode-0-part-003.parquet",
    ]
    assert all(r[1:] == (0, 0, None, None, None, 0, 0, None, None) for r in none_kept)
    said = query(db, "SELECT file, reason FROM quarantine ORDER BY ALL")
    assert sum("node=decode-0/decode-0-part-002" in f for f, _ in said) == 100  # all its rows
    hostile = "SELECT count(*) FROM ingest_warnings WHERE value LIKE '=HYPERLINK%'"
    assert query(db, hostile) == [(1,)]  # two rows of one part: one warning


def test_batches_are_runs_of_one_schema_within_their_bounds(monkeypatch) -> None:
    monkeypatch.setattr(check, "BATCH_ROWS", 100)
    monkeypatch.setattr(check, "BATCH_PARTS", 3)
    files = [LedgerFile(f"/l/node=a/{i}.parquet", f"{i}", "a", i) for i in range(9)]
    rows = dict(zip((f.url for f in files), [10, 10, 10, 10, 500, 0, 90, 20, 5], strict=True))
    one, other = {"ts": "TIMESTAMP WITH TIME ZONE"}, {"ts": "VARCHAR"}
    schemas = {f.rel: other if f.rank == 2 else one for f in files}
    got = [[f.rank for f in b] for b in check.batches(files, schemas, rows)]
    assert got == [[0, 1], [2], [3], [4], [5, 6], [7, 8]]


def test_a_damaged_part_in_a_batch_is_named(case, tmp_path, capsys) -> None:
    """Pages that cannot be decoded show only when the rows are read: the batch's read fails,
    and the parts are read again one by one to name the damaged one."""
    damaged_case = tmp_path / "case"
    shutil.copytree(case, damaged_case)
    part = sorted((damaged_case / "kv_events" / "node=decode-0").glob("*.parquet"))[
        7
    ]  # inside a batch: not its first part
    data = bytearray(part.read_bytes())
    start = len(data) // 3
    data[start : start + len(data) // 3] = b"\x55" * (len(data) // 3)  # the footer intact
    part.write_bytes(bytes(data))
    db = tmp_path / "external.duckdb"
    capsys.readouterr()
    assert run(["ingest", str(damaged_case), "--db", str(db), "--ledger-external"]) == 2
    said = capsys.readouterr().err
    assert f"kv_events/node=decode-0/{part.name}: cannot read this Parquet file" in said, said
    assert "Traceback" not in said


def _typed_parts(folder: Path) -> list[LedgerFile]:
    """Parts of many column types, nested ones among them, one with a duplicated column name,
    one written with INT96 times."""
    rows = {
        "ts": pa.array([dt.datetime(2026, 1, 1)], pa.timestamp("us", tz="UTC")),
        "ts_ns": pa.array([dt.datetime(2026, 1, 1)], pa.timestamp("ns")),
        "small": pa.array([1], pa.int32()),
        "unsigned": pa.array([1], pa.uint64()),
        "text": pa.array(["x"]),
        "bytes": pa.array([b"x"], pa.binary()),
        "list": pa.array([[1, 2]], pa.list_(pa.int64())),
        "record": pa.array([{"a": 1, "b": "x"}]),
        "map": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
        "lists": pa.array([[[1]]], pa.list_(pa.list_(pa.int8()))),
        "coded": pa.array([7]).dictionary_encode(),
        "day": pa.array([dt.date(2026, 1, 1)]),
        "flag": pa.array([True]),
    }
    folder.mkdir(parents=True)
    pq.write_table(pa.table(rows), folder / "a.parquet")
    pq.write_table(pa.table(rows), folder / "b.parquet", use_deprecated_int96_timestamps=True)
    pq.write_table(pa.table({"text": ["x"], "seq": [1]}), folder / "c.parquet")
    twice = pa.Table.from_arrays([pa.array([1]), pa.array(["y"])], names=["seq", "seq"])
    pq.write_table(twice, folder / "d.parquet")
    return [
        LedgerFile(str(p), p.name, "n", i) for i, p in enumerate(sorted(folder.glob("*.parquet")))
    ]


def test_the_schemas_read_together_are_those_each_part_describes(tmp_path, monkeypatch) -> None:
    import forensics.ledger.schemas as schemas

    # these parts are no ledger: no column is required of them
    monkeypatch.setattr(schemas, "KV_EVENTS", SimpleNamespace(required=[]))
    files = _typed_parts(tmp_path / "node=n")
    con = duckdb.connect()
    described = {f.rel: schemas.columns_of(con, f) for f in files}
    alone: list[str] = []
    describe = schemas.columns_of

    def counted(con, f):
        alone.append(f.rel)
        return describe(con, f)

    monkeypatch.setattr(schemas, "columns_of", counted)
    assert schemas.schemas_of(con, files) == described
    assert alone == ["d.parquet"]  # the part with a column name twice, described by itself
    assert list(described["a.parquet"]) == list(pq.read_schema(files[0].url).names)


def test_the_views_of_the_batched_case_give_the_loaded_analysis(case, loaded, tmp_path) -> None:
    """decode-0's parts fall in view groups of consecutive ranks (flags and schema alternate,
    an empty part among them): the external analysis gives the loaded ledger's tables."""
    analysed = tmp_path / "loaded.duckdb"
    shutil.copy(loaded, analysed)
    assert run(["analyze", "--db", str(analysed)]) in (0, 1)
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    assert run(["analyze", "--db", str(db)]) in (0, 1)
    assert differences(analysed, db) == {}
    assert query(db, "SELECT count(*) FROM exposures")[0][0] > 0  # something to compare


def test_view_groups_are_runs_of_consecutive_parts_read_alike() -> None:
    def part(rank: int, flagged: bool, node: str = "a") -> PartView:
        return PartView(LedgerFile(f"/{node}/{rank}", f"{rank}", node, rank), (), flagged, False)

    parts = [part(0, False), part(1, True), part(2, False), part(3, False), part(5, False)]
    parts += [part(6, False, "b"), part(4, False)]  # out of order: grouped by rank
    got = [[p.file.rank for p in g] for g in groups(parts)]
    assert got == [[0], [1], [2, 3, 4, 5], [6]]


def test_a_part_whose_name_the_footer_read_spells_otherwise_is_counted_by_itself() -> None:
    """A filesystem may give a URL back spelled its own way: that part's rows are read by
    themselves, never taken as missing."""

    class Spelled:
        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def execute(self, _query: str, params: dict) -> SimpleNamespace:
            paths = params["paths"]
            self.calls.append(paths)
            rows = {"s3://b/a.parquet": 5, "s3://b/b.parquet": 7}
            spelled = [(p.replace("s3://b/b", "s3://b//b"), rows[p]) for p in paths]
            given = spelled if len(paths) > 1 else [(paths[0] + "?v", rows[paths[0]])]
            return SimpleNamespace(fetchall=lambda: given)

    con = Spelled()
    files = [LedgerFile(f"s3://b/{n}.parquet", f"{n}", "x", i) for i, n in enumerate("ab")]
    assert check._footer_rows(con, files) == {"s3://b/a.parquet": 5, "s3://b/b.parquet": 7}
    assert con.calls == [[f.url for f in files], ["s3://b/b.parquet"]]


@pytest.mark.parametrize("name", ["decode-0-part-9.parquet.gz", "extra.csv", "more.jsonl.zst"])
def test_a_file_of_rows_the_external_ledger_cannot_read_is_refused(tmp_path, capsys, name):
    """Left out, a compressed part's or another format's rows would be lost without a word."""
    case = hive_sample(tmp_path)
    (case / "kv_events" / "node=decode-0" / name).write_bytes(b"rows")
    capsys.readouterr()
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 2
    said = capsys.readouterr().err
    assert f"node=decode-0/{name}: a file in the external ledger that is not a Parquet" in said


def test_files_that_are_not_the_ledgers_stay_out_of_it(tmp_path) -> None:
    """What a writer leaves beside its parts (_SUCCESS, checksums) is not ledger rows."""
    case = hive_sample(tmp_path)
    for name in ("_SUCCESS", ".decode-0-part-00001.parquet.crc"):
        (case / "kv_events" / "node=decode-0" / name).write_bytes(b"")
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0


def _damage(part: Path) -> None:
    data = bytearray(part.read_bytes())
    data[len(data) // 3 : 2 * len(data) // 3] = b"\x55" * (2 * len(data) // 3 - len(data) // 3)
    part.write_bytes(bytes(data))


def test_two_damaged_partitions_name_the_first_whichever_check_ends_first(
    tmp_path, capsys, monkeypatch
) -> None:
    """The partitions are checked side by side; the failure reported is the first partition's
    in partition order, even when a later one's check fails first."""
    case = hive_sample(tmp_path)
    first = next((case / "kv_events" / "node=decode-0").glob("*.parquet"))
    later = next((case / "kv_events" / "node=prefill-1").glob("*.parquet"))
    _damage(first)
    _damage(later)
    checked = store.check_partition

    def slow_first(files, *args):  # type: ignore[no-untyped-def]
        if files[0].node == "decode-0":
            time.sleep(1.0)  # the later partition's check fails before this one does
        return checked(files, *args)

    monkeypatch.setattr(store, "check_partition", slow_first)
    capsys.readouterr()
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 2
    said = capsys.readouterr().err
    assert f"kv_events/node=decode-0/{first.name}: cannot read" in said, said
    assert "prefill-1" not in said
    assert not db.exists()


def test_the_checks_share_the_cores_and_the_memory_limit(tmp_path, monkeypatch) -> None:
    case = hive_sample(tmp_path)
    shares: list[tuple[str, tuple[int, str | None]]] = []
    checked = store.check_partition

    def record(files, nodes, ids, assume_utc, spill_beside, share, pool):  # type: ignore[no-untyped-def]
        shares.append((files[0].node, share))
        return checked(files, nodes, ids, assume_utc, spill_beside, share, pool)

    monkeypatch.setattr(store, "check_partition", record)
    monkeypatch.setattr(store, "CHECK_BYTES", 0)  # a check per partition
    monkeypatch.setattr(store.os, "cpu_count", lambda: 6)
    monkeypatch.setattr(store, "_local_bytes", lambda f: 1 + 99 * f.node.startswith("prefill"))
    monkeypatch.setenv("KVFORENSICS_MEMORY_LIMIT", "3GB")
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) in (0, 1)
    assert sorted(n for n, _ in shares) == ["decode-0", "decode-1", "prefill-0", "prefill-1"]
    assert {s for _, s in shares} == {(3, f"{3 * 10**9 // 2 >> 10}KiB")}
    assert {n for n, _ in shares[:2]} == {"prefill-0", "prefill-1"}  # the largest first


def test_an_interrupt_stops_the_checks_not_yet_started(tmp_path, capsys, monkeypatch) -> None:
    """Ctrl-C while two checks run: the two finish, the other two never start."""
    case = hive_sample(tmp_path)
    started: list[str] = []
    lock = threading.Lock()
    interrupted = threading.Event()

    def slow(files, *_args):  # type: ignore[no-untyped-def]
        with lock:
            started.append(files[0].node)
            if len(started) == 1:  # Ctrl-C reaches the main thread while the checks run
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        assert interrupted.wait(60)
        raise AssertionError("not reached: the interrupt stops the ingest first")

    monkeypatch.setattr(store, "as_completed", watching(store.as_completed, interrupted))
    monkeypatch.setattr(store, "CHECK_BYTES", 0)  # a check per partition
    monkeypatch.setattr(store, "check_partition", slow)
    db = tmp_path / "x.duckdb"
    capsys.readouterr()
    # Ctrl-C as Python handles it by default (a library run before in this process, Ray, may
    # have left a handler of its own)
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 2
    finally:
        signal.signal(signal.SIGINT, handler)
    assert "interrupted" in capsys.readouterr().err
    assert sorted(started) == ["decode-0", "decode-1"]  # the largest two; not the other two
    assert not db.exists()


def _checked_together(monkeypatch) -> list[list[str]]:
    """Every partition of a case in one check; the nodes of each check made, in a list."""
    monkeypatch.setattr(store, "CHECK_WORKERS", 1)
    monkeypatch.setattr(store, "CHECK_SHARE", 1)
    monkeypatch.setattr(store, "CHECK_BYTES", 1 << 40)
    made: list[list[str]] = []
    checked = store.check_partition

    def counted(files, *args):  # type: ignore[no-untyped-def]
        made.append(sorted({f.node for f in files}))
        return checked(files, *args)

    monkeypatch.setattr(store, "check_partition", counted)
    return made


def test_partitions_checked_together_give_the_loaded_records(
    case, loaded, tmp_path, monkeypatch
) -> None:
    """The case's four partitions in one check, their parts of one schema read in scans that
    span nodes: the quarantine, warnings, file counts and analysis of the loaded ledger."""
    made = _checked_together(monkeypatch)
    analysed = tmp_path / "loaded.duckdb"
    shutil.copy(loaded, analysed)
    assert run(["analyze", "--db", str(analysed)]) in (0, 1)
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    assert made == [["decode-0", "decode-1", "prefill-0", "prefill-1"]]
    assert query(db, "SELECT count(*) FROM quarantine")[0][0] > 0  # something to compare
    assert run(["analyze", "--db", str(db)]) in (0, 1)
    assert differences(analysed, db) == {}


def test_a_row_in_another_folder_is_found_in_a_scan_of_several_nodes(tmp_path, monkeypatch) -> None:
    """A row of decode-1's part naming decode-0, its part read in one scan with decode-0's:
    checked against its own part's folder, and only it is quarantined."""
    made = _checked_together(monkeypatch)
    case = hive_sample(tmp_path)
    part = next((case / "kv_events" / "node=decode-1").glob("*.parquet"))
    edit_part(part, 3, "node", "decode-0")
    db = tmp_path / "case.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    assert len(made) == 1
    [(file, row, value, reason)] = query(db, 'SELECT file, "row", "value", reason FROM quarantine')
    assert (file.split("/")[-2], row, value) == ("node=decode-1", 4, "decode-0")
    assert reason.startswith("row is in folder node=decode-1 but names node decode-0")


def test_checks_take_runs_of_small_partitions_in_partition_order(monkeypatch) -> None:
    sizes = {"a": 10, "b": 20, "c": 500, "d": 5, "e": 5, "f": 600}
    monkeypatch.setattr(store, "_local_bytes", lambda f: sizes[f.node])
    parts = [[LedgerFile(f"/{n}/p", f"{n}/p", n, i)] for i, n in enumerate(sizes)]
    # 1,140 bytes over one worker: at most 1,140 // 4 = 285 bytes a check
    got = [[f.node for f in g] for g in store.checked_together(parts, workers=1)]
    assert got == [["a", "b"], ["c"], ["d", "e"], ["f"]]
    monkeypatch.setattr(store, "CHECK_NODES", 1)
    assert len(store.checked_together(parts, workers=1)) == 6


def test_a_scan_spans_nodes_only_where_the_parts_have_a_node_column() -> None:
    files = [LedgerFile(f"/{n}/p", f"{n}/p", n, i) for i, n in enumerate("aab")]
    rows = {f.url: 10 for f in files}
    with_node = {f.rel: {"node": "VARCHAR", "ts": "TIMESTAMP"} for f in files}
    without = {f.rel: {"ts": "TIMESTAMP"} for f in files}
    assert [len(b) for b in check.batches(files, with_node, rows)] == [3]
    assert [len(b) for b in check.batches(files, without, rows)] == [2, 1]
