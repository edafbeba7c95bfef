"""A ledger kept outside the case database (ingest --ledger-external), on the local engine: the
same tables as the loaded ledger (EXCEPT ALL both ways), from a folder and from an fsspec URL;
bad rows quarantined as usual, rows in the wrong node's folder quarantined, a part outside a
node folder refused; and the CLI's optional option values."""

from __future__ import annotations

import hashlib
import shutil
import threading
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from support.cases import query
from support.paths import SAMPLE
from support.samples import (
    OWN_LEDGER,
    differences,
    edit_part,
    hive_sample,
    split_in_two,
    task_per_partition,
)

from forensics.cli import run
from forensics.cli.ray_option import optional_values
from forensics.ledger.external import filesystem, sha256_of


@pytest.fixture(scope="module")
def spoiled(tmp_path_factory) -> tuple[Path, Path]:
    """The hive sample with decode-0's ledger in two parts and one bad slot_count, and its
    loaded-and-analysed case database."""
    case = hive_sample(tmp_path_factory.mktemp("ext"))
    split_in_two(case, "decode-0")
    edit_part(next((case / "kv_events" / "node=decode-1").glob("*.parquet")), 4, "slot_count", 0)
    db = case.parent / "loaded.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-load"]) == 1
    assert run(["analyze", "--db", str(db)]) == 1
    return case, db


# The named events of decode-0's two parts read in one scan (the sample's parts are small), or
# each part's by itself, as a large part's are.
NAMED_READS = pytest.mark.parametrize("alone", [False, True], ids=["grouped", "alone"])


def read_alone(monkeypatch, alone: bool) -> None:
    if alone:
        monkeypatch.setattr("forensics.analysis.partitions.NAMED_ALONE_ROWS", 1)


@NAMED_READS
def test_external_folder_gives_the_tables_of_the_loaded_ledger(
    spoiled, tmp_path, monkeypatch, alone
) -> None:
    read_alone(monkeypatch, alone)
    case, loaded = spoiled
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    assert query(db, OWN_LEDGER) == [("VIEW",)]  # nothing of it is stored
    assert query(db, "SELECT count(*) FROM ledger_files") == [(5,)]
    assert run(["analyze", "--db", str(db)]) == 1
    assert query(db, "SELECT count(*) FROM exposures") == [(46,)]  # the sample's ground truth
    assert differences(loaded, db) == {}


@NAMED_READS
def test_external_url_gives_the_tables_of_the_loaded_ledger(
    spoiled, tmp_path, monkeypatch, alone
) -> None:
    read_alone(monkeypatch, alone)
    fsspec = pytest.importorskip("fsspec")
    case, loaded = spoiled
    fs = fsspec.filesystem("memory")
    for part in sorted((case / "kv_events").rglob("*.parquet")):
        fs.pipe(f"/kvf-ledger/{part.parent.name}/{part.name}", part.read_bytes())
    db = tmp_path / "url.duckdb"
    assert (
        run(["ingest", str(case), "--db", str(db), "--ledger-external", "memory://kvf-ledger"]) == 1
    )
    assert run(["analyze", "--db", str(db)]) == 1
    diff = differences(loaded, db)
    assert set(diff) == {"input_files", "quarantine"}  # the parts are named by their URL
    assert query(db, 'SELECT file, "row", reason FROM quarantine') == [
        (
            "memory:///kvf-ledger/node=decode-1/decode-1-part-00001.parquet",
            5,
            "slot_count must be an integer > 0",
        )
    ]


def test_readers_of_a_memory_url_each_have_their_own_position() -> None:
    """fsspec's memory filesystem gives every open of a file one shared file object; the
    ledger's readers (DuckDB, and the SHA-256 computed beside it) each get their own, so a
    checksum taken while another reader is half way through is the file's."""
    fsspec = pytest.importorskip("fsspec")
    data = bytes(range(256)) * 40_000
    fsspec.filesystem("memory").pipe("/kvf-positions/part.parquet", data)
    url = "memory://kvf-positions/part.parquet"
    fs = filesystem(url)
    first, second = fs.open(url, "rb"), fs.open(url, "rb")
    assert first.read(5) == data[:5] and second.read(5) == data[:5]
    first.seek(7_777)
    assert sha256_of(url) == (hashlib.sha256(data).hexdigest(), len(data))
    assert first.read(3) == data[7_777:7_780]
    assert [f["name"] for f in fs.ls("/kvf-positions")] == ["/kvf-positions/part.parquet"]


def test_a_row_in_another_nodes_folder_is_quarantined(tmp_path) -> None:
    case = hive_sample(tmp_path)
    edit_part(next((case / "kv_events" / "node=decode-0").glob("*.parquet")), 0, "node", "decode-1")
    db = tmp_path / "case.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    [(column, value, reason)] = query(db, 'SELECT "column", "value", reason FROM quarantine')
    assert (column, value) == ("node", "decode-1")
    assert "folder node=decode-0" in reason


def test_a_part_outside_a_node_folder_is_refused(tmp_path) -> None:
    case = hive_sample(tmp_path)
    part = next((case / "kv_events" / "node=decode-0").glob("*.parquet"))
    part.rename(case / "kv_events" / part.name)
    assert run(["ingest", str(case), "--db", str(tmp_path / "c.duckdb"), "--ledger-external"]) == 2


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["analyze", "--db", "x", "--ray"], ["analyze", "--db", "x", "--ray", "local"]),
        (["analyze", "--ray", "--db", "x"], ["analyze", "--ray", "local", "--db", "x"]),
        (["analyze", "--ray", "10.0.0.5:6379"], ["analyze", "--ray", "10.0.0.5:6379"]),
        (
            ["investigate", "--ray", "case", "--out", "o"],
            ["investigate", "--ray", "local", "case", "--out", "o"],
        ),
        (["ingest", "c", "--ledger-external"], ["ingest", "c", "--ledger-external", "kv_events"]),
        (
            ["ingest", "c", "--ledger-external", "s3://b/l"],
            ["ingest", "c", "--ledger-external", "s3://b/l"],
        ),
    ],
)
def test_option_values_may_be_left_out(argv, expected) -> None:
    assert optional_values(argv) == expected


def test_an_unreadable_ledger_is_an_error_not_an_empty_ledger(tmp_path) -> None:
    case = hive_sample(tmp_path)
    db = tmp_path / "case.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0
    shutil.move(case / "kv_events" / "node=decode-0", tmp_path / "moved")
    assert run(["analyze", "--db", str(db)]) == 2
    from forensics.db import connect

    con = connect(db)
    try:
        with pytest.raises(duckdb.Error, match="external ledger of this case"):
            con.execute("SELECT count(*) FROM kv_events").fetchall()
    finally:
        con.close()


def test_ingest_ray_without_an_external_ledger_is_a_usage_error(tmp_path) -> None:
    assert run(["ingest", str(SAMPLE), "--db", str(tmp_path / "c.duckdb"), "--ray"]) == 2
    assert not (tmp_path / "c.duckdb").exists()


def test_unknown_requests_are_warned_of_once_as_for_the_loaded_ledger(tmp_path) -> None:
    case = hive_sample(tmp_path)
    lines = (case / "requests.csv").read_text().splitlines(keepends=True)
    (case / "requests.csv").write_text("".join(lines[:1] + lines[3:]))  # two requests fewer
    loaded, external = tmp_path / "loaded.duckdb", tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(loaded), "--ledger-load"]) in (0, 1)
    assert run(["ingest", str(case), "--db", str(external), "--ledger-external"]) in (0, 1)
    text = 'SELECT file, "row", "value", reason FROM ingest_warnings ORDER BY ALL'
    warned = query(loaded, text)
    assert sum("request not in the request log" in r[3] for r in warned) >= 2, warned
    assert query(external, text) == warned


def test_a_node_with_seq_on_some_rows_is_warned_of_as_for_the_loaded_ledger(tmp_path) -> None:
    """decode-1 loses seq on two rows (one of them also quarantined for its slot_count): both
    ways of ingesting warn once that its events are ordered by ts, with the same counts."""
    case = hive_sample(tmp_path)
    part = next((case / "kv_events" / "node=decode-1").glob("*.parquet"))
    edit_part(part, 7, "seq", None)
    edit_part(part, 9, "seq", None)
    edit_part(part, 9, "slot_count", 0)
    loaded, external = tmp_path / "loaded.duckdb", tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(loaded), "--ledger-load"]) == 1
    assert run(["ingest", str(case), "--db", str(external), "--ledger-external"]) == 1
    text = """SELECT file, "row", "value", reason FROM ingest_warnings WHERE "column" = 'seq'"""
    warned = query(loaded, text)
    kept = pq.read_metadata(part).num_rows - 1
    rel = f"kv_events/node=decode-1/{part.name}"
    reason = (
        f"node decode-1: {kept - 1} event(s) carry seq and 1 do not, so its events are "
        "ordered by ts, not seq"
    )
    assert warned == [(rel, None, "decode-1", reason)]
    assert query(external, text) == warned


class _Meeting:
    """Partition tasks arriving at their sweep: each waits a moment for another to be there
    too, and records whether it met one (two nodes held in memory at once) or swept alone."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self.here = 0
        self.met: list[bool] = []
        self._changed = threading.Condition()

    def sweep(self, find, events):  # wraps forensics.analysis.order.find_on_node
        from forensics.analysis.order import WARM_UP_NODE

        if events.node == WARM_UP_NODE:  # the analysis loading its compiled code: no partition
            return find(events)
        with self._changed:
            self.here += 1
            self._changed.notify_all()
            self.met.append(self._changed.wait_for(lambda: self.here >= 2, self.wait_s))
        try:
            return find(events)
        finally:
            with self._changed:
                self.here -= 1


@pytest.mark.parametrize(("limit", "together"), [("4GB", True), ("300MB", False)])
def test_partitions_hold_their_counted_need_and_are_swept_together_while_they_fit(
    spoiled, tmp_path, monkeypatch, limit, together
) -> None:
    """Each partition task holds its node's arrays in the run's memory budget from the counts
    its pass over the partition made (forensics.analysis.order.need_of), so two partitions are
    swept at once where both fit (4 GB) and one after the other where only one does (300 MB:
    DuckDB keeps its 256 MiB floor, the sweep gets the rest). The tables are the loaded
    ledger's either way."""
    from forensics.analysis import budget as budget_mod
    from forensics.analysis import order

    case, loaded = spoiled
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    meeting = _Meeting(wait_s=5.0 if together else 0.5)  # a meeting ends the wait at once
    find = order.find_on_node
    monkeypatch.setattr(order, "find_on_node", lambda events: meeting.sweep(find, events))
    held: dict[str, int] = {}
    load_within = order.load_within

    def recorded(con, info, budget):
        events, share = load_within(con, info, budget)
        held[info.node] = share
        expected = min(budget.total, order.need_of(info))
        assert share == expected, (info.node, share, expected)
        return events, share

    monkeypatch.setattr(order, "load_within", recorded)
    monkeypatch.setenv("KVFORENSICS_MEMORY_LIMIT", limit)
    assert run(["analyze", "--db", str(db)]) == 1
    assert sorted(held) == ["decode-0", "decode-1", "prefill-0", "prefill-1"]
    assert len(meeting.met) == 4
    assert any(meeting.met) if together else not any(meeting.met)
    assert differences(loaded, db) == {}
    assert budget_mod.DUCKDB_FLOOR == 256 << 20  # what the 300 MB case relies on


def test_a_part_changed_or_cut_after_ingest_is_an_error_not_other_evidence(
    tmp_path, capsys
) -> None:
    """A part rewritten without its last rows after ingest, or cut in half: analyze refuses it,
    naming the part, and writes no analysis; as ingested again, the part is analysed."""
    case = hive_sample(tmp_path)
    db = tmp_path / "case.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0
    part = next((case / "kv_events" / "node=decode-1").glob("*.parquet"))
    original = part.read_bytes()
    table = pq.read_table(part)
    pq.write_table(table.slice(0, table.num_rows - 10), part)
    analysed = "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'exposures'"
    capsys.readouterr()
    assert run(["analyze", "--db", str(db)]) == 2
    said = capsys.readouterr().err
    assert f"{part.name} changed since it was ingested" in said and "internal error" not in said
    assert query(db, analysed) == [(0,)]
    part.write_bytes(original[: len(original) // 2])
    assert run(["analyze", "--db", str(db)]) == 2
    said = capsys.readouterr().err
    assert "node=decode-1 cannot be read" in said and "internal error" not in said
    assert f"error: {part.parent}: the partition" in said  # its folder: the read names the part
    assert query(db, analysed) == [(0,)]
    part.write_bytes(original)  # as ingested: the analysis runs again
    assert run(["analyze", "--db", str(db)]) == 1
    assert query(db, "SELECT count(*) FROM exposures") == [(46,)]


def test_the_changed_part_is_named_with_its_checksums() -> None:
    from forensics.errors import InputError
    from forensics.ledger.external import LedgerFile, check_digest

    part = LedgerFile("/x/node=n/p.parquet", "kv_events/node=n/p.parquet", "n", 0)
    check_digest(part, ("ab", 10), ("ab", 10))
    for recorded in (("cd", 10), ("ab", 11), None):
        with pytest.raises(InputError, match="kv_events/node=n/p.parquet changed since"):
            check_digest(part, ("ab", 10), recorded)


def test_the_largest_partitions_start_first_and_the_tables_stay_the_same(
    tmp_path, monkeypatch
) -> None:
    """With one worker the partitions are swept one at a time, largest first (here decode-0
    keeps only its first 20,000 events, so decode-1 is the largest), and the tables are the
    loaded ledger's: findings are stored in partition order whatever order they finish in."""
    from forensics.analysis import partitions

    task_per_partition(monkeypatch)
    case = hive_sample(tmp_path)
    (part,) = (case / "kv_events" / "node=decode-0").glob("*.parquet")
    pq.write_table(pq.read_table(part).slice(0, 20_000), part)
    loaded, db = tmp_path / "loaded.duckdb", tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(loaded), "--ledger-load"]) == 0
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0
    started: list[str] = []
    sweep = partitions.sweep_partition

    def recording(parts, *args, **kwargs):
        started.append(parts[0].file.node)
        return sweep(parts, *args, **kwargs)

    monkeypatch.setattr(partitions, "sweep_partition", recording)
    assert run(["analyze", "--db", str(loaded)]) in (0, 1)
    assert run(["analyze", "--db", str(db), "--workers", "1"]) in (0, 1)
    assert started == ["decode-1", "decode-0", "prefill-0", "prefill-1"]
    assert query(loaded, "SELECT count(*) > 0 FROM exposures") == [(True,)]
    assert differences(loaded, db) == {}


def test_largest_first_keeps_partition_order_among_equals() -> None:
    from forensics.analysis.tasks import largest_first

    assert largest_first([5, 9, 5, 0, 9]) == [1, 4, 0, 2, 3]
    assert largest_first([]) == []
