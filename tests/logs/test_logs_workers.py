"""Large logs are parsed in worker processes: what crosses back from a worker is whole."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import time
from concurrent.futures.process import BrokenProcessPool

import pytest
from support.paths import DATA

from forensics.errors import InputError, MissingColumnError
from forensics.logs import read
from forensics.logs.naming import LogFile

LOGS = DATA / "logs"


def test_an_error_keeps_its_file_and_fix_across_processes():
    err = MissingColumnError("a.parquet", "kv_events", "slot_idx", ["slot"], "slot")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is MissingColumnError
    assert (str(back), back.path, back.fix, back.column, back.found) == (
        str(err),
        "a.parquet",
        err.fix,
        "slot_idx",
        ["slot"],
    )


def test_a_worker_reports_an_unreadable_file_as_itself(tmp_path):
    gone = tmp_path / "decode-9.log"
    files = [
        LogFile("prefill-0", (), 0, "prefill-0.log", LOGS / "incident" / "prefill-0.log"),
        LogFile("decode-9", (), 0, "decode-9.log", gone),
    ]
    with pytest.raises(InputError) as alone:
        read.parse_files(files, parallel_bytes=1 << 60)
    with pytest.raises(InputError) as worker:
        read.parse_files(files, parallel_bytes=0)
    assert (worker.value.path, str(worker.value)) == (str(gone), str(alone.value))
    assert "No such file" in str(worker.value)


def test_small_logs_start_no_worker(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("a worker pool was started for small logs")

    monkeypatch.setattr(read, "ProcessPoolExecutor", refuse)
    files = [LogFile("p", (), 0, p.name, p) for p in sorted((LOGS / "variants").glob("*.log"))]
    results = read.parse_files(files)
    assert [r.file for r in results] == files


def test_a_killed_worker_leaves_the_parse_to_this_process(monkeypatch):
    class KilledPool:
        def __init__(self, *_args, **_kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *_exc):
            return False

        def submit(self, *_args):
            raise BrokenProcessPool("a worker was killed")

    monkeypatch.setattr(read, "ProcessPoolExecutor", KilledPool)
    files = [LogFile("p", (), 0, p.name, p) for p in sorted((LOGS / "variants").glob("*.log"))]
    results = read.parse_files(files, parallel_bytes=0)
    lines = [sum(1 for _ in p.path.open("rb")) for p in files]
    assert [(r.file, r.lines) for r in results] == list(zip(files, lines, strict=True))


def test_a_worker_ends_once_the_process_that_started_it_is_gone():
    """A worker whose starter is not its parent any more (here: never was) ends by itself."""
    worker = mp.get_context("spawn").Process(target=_orphaned_worker)
    worker.start()
    worker.join(timeout=10)
    alive = worker.is_alive()
    if alive:
        worker.kill()
    assert not alive and worker.exitcode == 1


def _orphaned_worker() -> None:
    read.exit_with_parent(parent=-1)
    time.sleep(30)  # waiting for work that never comes
