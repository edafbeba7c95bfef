"""Small partitions of a ledger kept outside the case are swept together, a run of them to a
task (forensics.analysis.tasks.grouped), with the tables a loaded ledger gives."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from support.cases import query
from support.interrupts import watching
from support.samples import differences, hive_sample, task_per_partition

import forensics.analysis.partitions
import forensics.analysis.tasks
from forensics.analysis.tasks import TASK_NODES, grouped
from forensics.cli import run as kvf


def _task(name: str, quarantined: int, facts: bool = True) -> tuple:
    """Stand-in arguments of one partition's task: its parts (names here), its quarantined
    rows, its recorded digests and facts."""
    rows = pa.table({"file": pa.array([name] * quarantined, pa.string())})
    fact = pa.table({"node": [name]}) if facts else None
    return ([name], True, rows, {name: ("sha", 1)}, fact, 1)


def test_runs_of_small_partitions_make_one_task_each_in_partition_order() -> None:
    # 8 workers' share is 10,200 // 8 // 4 = 318 events a task at most
    rows = [10, 20, 5000, 30, 40, 50, 5000, 60]
    args = [_task(f"n{i}", quarantined=i % 3) for i in range(len(rows))]
    tasks, counts = grouped(args, rows, workers=8)
    assert [t[0] for t in tasks] == [["n0", "n1"], ["n2"], ["n3", "n4", "n5"], ["n6"], ["n7"]]
    assert counts == [30, 5000, 120, 5000, 60]
    merged = tasks[2]
    assert merged[2].column("file").to_pylist() == ["n4", "n5", "n5"]  # n3 has none
    assert merged[3] == {"n3": ("sha", 1), "n4": ("sha", 1), "n5": ("sha", 1)}
    assert merged[4].column("node").to_pylist() == ["n3", "n4", "n5"]
    assert tasks[1] is args[2]  # a large partition's task as it was


def test_a_task_holds_at_most_task_nodes_partitions(monkeypatch) -> None:
    monkeypatch.setattr(forensics.analysis.tasks, "TASK_SHARE", 1)  # one worker, one task
    n = 2 * TASK_NODES + 1
    tasks, counts = grouped([_task(f"n{i}", 0) for i in range(n)], [1] * n, workers=1)
    assert [len(t[0]) for t in tasks] == [TASK_NODES, TASK_NODES, 1]
    assert sum(counts) == n


def test_a_task_has_facts_only_if_all_its_partitions_have(monkeypatch) -> None:
    monkeypatch.setattr(forensics.analysis.tasks, "TASK_SHARE", 1)
    args = [_task("a", 0), _task("b", 0, facts=False)]
    (task,), _ = grouped(args, [1, 1], workers=1)
    assert task[4] is None


def test_one_share_per_worker_keeps_the_workers_busy() -> None:
    """Eight partitions of 100 events on two workers: tasks of at most 100 events each."""
    tasks, _ = grouped([_task(f"n{i}", 0) for i in range(8)], [100] * 8, workers=2)
    assert len(tasks) == 8


@pytest.mark.parametrize("workers", [1, 2])
def test_partitions_swept_together_give_the_loaded_ledgers_tables(
    spoiled,  # noqa: F811
    tmp_path: Path,
    monkeypatch,
    workers: int,
) -> None:
    """The sample's four partitions, one with a quarantined row, swept in fewer tasks."""
    monkeypatch.setattr(forensics.analysis.tasks, "TASK_SHARE", 1)
    swept: list[list[str]] = []
    real = forensics.analysis.partitions.sweep_partition

    def counted(parts, *args, **kwargs):  # type: ignore[no-untyped-def]
        swept.append(sorted({p.file.node for p in parts}))
        return real(parts, *args, **kwargs)

    monkeypatch.setattr(forensics.analysis.partitions, "sweep_partition", counted)
    case, loaded = spoiled
    db = tmp_path / "external.duckdb"
    assert kvf(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    assert kvf(["analyze", "--db", str(db), "--workers", str(workers)]) == 1
    assert sorted(n for nodes in swept for n in nodes) == [
        "decode-0",
        "decode-1",
        "prefill-0",
        "prefill-1",
    ]
    assert len(swept) < 4 and any(len(nodes) > 1 for nodes in swept)
    assert query(db, "SELECT count(*) FROM exposures") == [(46,)]  # the sample's ground truth
    assert differences(loaded, db) == {}


def test_a_damaged_part_of_partitions_swept_together_is_named(tmp_path, monkeypatch, capsys):
    """The error names the task's partitions, the ledger's folder and the part the read
    failed on, and the analysis stops (exit 2)."""
    monkeypatch.setattr(forensics.analysis.tasks, "TASK_SHARE", 1)
    case = hive_sample(tmp_path)
    db = tmp_path / "external.duckdb"
    assert kvf(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0
    part = next((case / "kv_events" / "node=prefill-0").glob("*.parquet"))
    part.write_bytes(part.read_bytes()[:1000])
    capsys.readouterr()
    assert kvf(["analyze", "--db", str(db), "--workers", "1"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert f"{case / 'kv_events'}: the partitions node=decode-0, node=decode-1," in said, said
    assert f"node=prefill-0/{part.name}" in said


def test_an_interrupt_stops_the_tasks_not_yet_started(tmp_path, capsys, monkeypatch) -> None:
    """Ctrl-C while two partition tasks run: the two end, the other two never start, and the
    analysis changes nothing."""
    from forensics.analysis import partitions

    task_per_partition(monkeypatch)
    case = hive_sample(tmp_path)
    db = tmp_path / "external.duckdb"
    assert kvf(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0
    started: list[str] = []
    lock = threading.Lock()
    interrupted = threading.Event()

    def slow(parts, *_args, **_kwargs):  # type: ignore[no-untyped-def]
        with lock:
            started.append(parts[0].file.node)
            if len(started) == 1:  # Ctrl-C reaches the main thread while the tasks run
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        assert interrupted.wait(60)
        raise AssertionError("not reached: the interrupt stops the analysis first")

    monkeypatch.setattr(partitions, "as_completed", watching(partitions.as_completed, interrupted))
    monkeypatch.setattr(partitions, "sweep_partition", slow)
    capsys.readouterr()
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert kvf(["analyze", "--db", str(db), "--workers", "2"]) == 2
    finally:
        signal.signal(signal.SIGINT, handler)
    assert "interrupted" in capsys.readouterr().err
    assert len(started) == 2  # the largest two; not the other two
    # the analysis' transaction rolled back: no table of it was made
    assert query(db, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'exposures'") == [
        (0,)
    ]
