"""The tap's recorder and writer: rows reach rotating Parquet files in order with their seq,
and a writer that falls behind makes the engine drop whole batches with a gap marker, never
wait."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.cases import query
from support.samples import differences

from forensics.cli import run as cli
from forensics.db import connect
from forensics.tap import writer as writer_mod
from forensics.tap.hashing import PrefixHashes, chain, label
from forensics.tap.recorder import SEQ_SHIFT, Recorder, Settings


def _row(k: int) -> tuple:
    return (f"req-{k % 3}", "write", k, 1, k, "decode", None)


def _read(folder: Path) -> list[dict]:
    rows: list[dict] = []
    for path in sorted(folder.rglob("*.parquet")):
        rows += pq.read_table(path).to_pylist()
    return rows


def test_rows_rotate_into_parquet_in_order(tmp_path: Path) -> None:
    rec = Recorder(Settings(tmp_path, "node-a", batch_events=10, rotate_events=25))
    for k in range(100):
        rec.rows([_row(k)])
    rec.close()
    files = sorted((tmp_path / "kv_events").rglob("*.parquet"))
    assert len(files) >= 4 and not list(tmp_path.rglob("*.tmp"))
    assert {f.parent.name for f in files} == {"node=node-a"}  # the layout read in place
    rows = _read(tmp_path / "kv_events")
    assert [r["slot_start"] for r in rows] == list(range(100))
    seqs = [r["seq"] for r in rows]
    assert seqs == list(range(seqs[0], seqs[0] + 100)) and seqs[0] >> SEQ_SHIFT > 0
    assert {r["node"] for r in rows} == {"node-a"}
    status = json.loads(next((tmp_path / "tap").glob("status-*.json")).read_text())
    assert (status["events_recorded"], status["events_written"], status["events_dropped"]) == (
        100,
        100,
        0,
    )


def test_an_idle_engine_leaves_no_part_unfinished(tmp_path: Path) -> None:
    """A process killed without closing its recorder (vLLM's server kills its engine core on a
    plain stop) keeps every event recorded before it went idle: the open part is closed once
    nothing was written to it for idle_close_s, long before rotate_s."""
    rec = Recorder(Settings(tmp_path, "node-i", batch_events=4, flush_s=0.05, idle_close_s=0.3))
    for k in range(10):
        rec.rows([_row(k)])
    deadline = time.monotonic() + 10
    while list(tmp_path.rglob("*.tmp")) or not list(tmp_path.rglob("*.parquet")):
        assert time.monotonic() < deadline, sorted(p.name for p in tmp_path.rglob("*"))
        time.sleep(0.05)
    # not closed: what a killed process leaves
    assert [r["slot_start"] for r in _read(tmp_path / "kv_events")] == list(range(10))
    rec.rows([_row(10)])  # a later event opens a new part
    rec.close()
    assert [r["slot_start"] for r in _read(tmp_path / "kv_events")] == list(range(11))
    assert len(list((tmp_path / "kv_events").rglob("*.parquet"))) == 2


def test_lagging_writer_drops_batches_with_gap_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    table = writer_mod.events_table

    def slow(node: str, rows: list) -> object:
        gate.wait(10)
        return table(node, rows)

    monkeypatch.setattr(writer_mod, "events_table", slow)
    rec = Recorder(Settings(tmp_path, "node-b", batch_events=5, queue_batches=2))
    t0 = time.monotonic()
    for k in range(200):
        rec.rows([_row(k)])
    assert time.monotonic() - t0 < 5  # the engine side never waited for the writer
    gate.set()
    rec.close()
    rows = _read(tmp_path / "kv_events")
    gaps = [json.loads(line) for line in next((tmp_path / "tap").glob("gaps-*")).open()]
    assert rec.dropped > 0 and sum(g["dropped"] for g in gaps) == rec.dropped
    assert len(rows) + rec.dropped == 200
    kept = {r["seq"] for r in rows}
    lost = {s for g in gaps for s in range(g["first_seq"], g["last_seq"] + 1)}
    base = min(kept | lost)
    assert kept.isdisjoint(lost) and kept | lost == set(range(base, base + 200))


def test_block_identity_depends_on_every_earlier_token() -> None:
    a, b = list(range(64)), list(range(64))
    b[3] = 999  # differs in the first block only
    ha, hb = PrefixHashes(32), PrefixHashes(32)
    assert ha.of_block(a, 0, 32) != hb.of_block(b, 0, 32)
    assert ha.of_block(a, 1, 64) != hb.of_block(b, 1, 64)  # the second block's tokens agree
    assert ha.of_block(a, 1, 64) == label(chain(chain(b"kvforensics-tap-v1", a[:32]), a[32:]))
    assert ha.of_block(a, 1, 40) != ha.of_block(a, 1, 64)  # a partial block is another thing


@pytest.mark.parametrize("node", ["vllm-a", "host:8000", "7", "n=1 ü"])
def test_a_tap_folder_is_a_case_loaded_or_read_in_place(tmp_path: Path, node: str) -> None:
    """The ledger's parts lie in kv_events/node=NODE/: `ingest --ledger-load` loads them,
    `ingest` reads them in place (the default for such a ledger), and both analyses give the
    same tables."""
    case = tmp_path / "case"
    rec = Recorder(Settings(case, node, batch_events=10, rotate_events=10))
    for k in range(40):  # three requests allocate, write and read their slots; one frees
        rid = f"req-{k % 3}"
        op = "alloc" if k < 3 else "free" if k == 39 else "read" if k % 2 else "write"
        rec.rows([(rid, op, k % 3 * 4, 4, 0, "decode" if op == "write" else None, None)])
    rec.close()
    header = "request_id,account_id,model,received_at,http_status,prompt_tokens\n"
    rows = "".join(f"req-{i},acct-{i},m,2026-08-27T10:00:0{i}Z,200,4\n" for i in range(3))
    (case / "requests.csv").write_text(header + rows)
    assert len(list((case / "kv_events" / f"node={node}").glob("*.parquet"))) == 4
    loaded, external = tmp_path / "loaded.duckdb", tmp_path / "external.duckdb"
    assert cli(["ingest", str(case), "--db", str(loaded), "--ledger-load"]) == 0
    assert cli(["ingest", str(case), "--db", str(external)]) == 0
    for db in (loaded, external):
        assert cli(["analyze", "--db", str(db)]) in (0, 1)
    assert differences(loaded, external) == {}
    assert query(external, "SELECT DISTINCT node FROM ledger_files") == [(node,)]


@pytest.mark.parametrize("node", ["a/b", "..", "tab\there", "padded ", "\u3000wide"])
def test_a_node_name_no_folder_carries_keeps_the_flat_layout(tmp_path: Path, node: str) -> None:
    """A folder could not be named after it, or would spell it otherwise than ingest reads the
    rows' node (trimmed): its parts stay in kv_events/, where the loaded ingest reads them."""
    assert writer_mod.ledger_folder(tmp_path, node) == tmp_path / "kv_events"


@pytest.mark.parametrize("external", [False, True], ids=["loaded", "external"])
def test_a_restart_keeps_the_events_in_input_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, external: bool
) -> None:
    """An engine restarted on one node: the new process's id may sort before the old one's.
    The parts sort by the second each process started, so ingest numbers the old process's
    events before the new one's, as they happened."""
    case = tmp_path / "case"
    clock = [1_788_000_000.0]
    monkeypatch.setattr("forensics.tap.recorder.time.time", lambda: clock[0])
    # an hour later, process 40000, whose id sorts before 5000's as text
    for pid, start in ((5_000, 1_788_000_000), (40_000, 1_788_003_600)):
        clock[0] = float(start)
        monkeypatch.setattr("forensics.tap.recorder.os.getpid", lambda pid=pid: pid)
        rec = Recorder(Settings(case, "decode-0", batch_events=5, rotate_events=5))
        for k in range(12):
            rec.rows([(f"req-{pid}-{k % 2}", "write", k, 1, k, "decode", None)])
        rec.close()
    parts = sorted(p.name for p in (case / "kv_events" / "node=decode-0").glob("*.parquet"))
    assert [p.split("-")[2] for p in parts] == ["1788000000"] * 3 + ["1788003600"] * 3
    header = "request_id,account_id,model,received_at,http_status,prompt_tokens\n"
    rows = "".join(
        f"req-{pid}-{i},acct-{i},m,2026-08-27T10:00:0{i}Z,200,4\n"
        for pid in (9, 40_000)
        for i in (0, 1)
    )
    (case / "requests.csv").write_text(header + rows)
    db = tmp_path / "case.duckdb"
    args = ["ingest", str(case), "--db", str(db)] + (["--ledger-external"] if external else [])
    assert cli(args) == 0
    assert cli(["analyze", "--db", str(db)]) in (0, 1)
    con = connect(db, read_only=True)  # with the view over an external ledger
    try:
        seqs = [
            s for (s,) in con.execute("SELECT seq FROM kv_events ORDER BY input_order").fetchall()
        ]
    finally:
        con.close()
    assert len(seqs) == 24 and seqs == sorted(seqs)  # input order is the order of events


def test_a_preempted_requests_contents_are_recorded_once_when_it_finishes() -> None:
    """vLLM frees a preempted request's blocks while it is still running, then again when it
    finishes: one contents row, with every output token (two rows quarantine the second as a
    duplicate request_id)."""
    from types import SimpleNamespace

    from forensics.tap.vllm_plugin import Tap

    rows: list[tuple[str, list[int], list[int], list[int] | None]] = []
    tap = Tap.__new__(Tap)
    tap.settings = SimpleNamespace(contents=True)
    tap.rec = SimpleNamespace(rows=lambda _rows: None, content=lambda *row: rows.append(row))
    held = SimpleNamespace(rid="r1", own_from=0, hit_end=0)
    tap.tracker = SimpleNamespace(held={"r1": held}, free=lambda _rid: [])
    status = {"finished": False}
    request = SimpleNamespace(
        request_id="r1",
        prompt_token_ids=[1, 2, 3],
        output_token_ids=[7, 8],
        is_finished=lambda: status["finished"],
    )
    tap.free(request)  # preempted
    assert rows == []
    request.output_token_ids = [7, 8, 9, 10]
    status["finished"] = True
    tap.free(request)
    assert rows == [("r1", [1, 2, 3], [7, 8, 9, 10], None)]
