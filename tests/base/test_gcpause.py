"""Python's cyclic garbage collector is off while the analysis and ingest run, in every thread
they start, and back as it was afterwards, after a failure too; what they leave in cycles is
collected by the next collection."""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

import pytest
from support.samples import hive_sample

from forensics.analysis import order
from forensics.analysis.stage import analyze
from forensics.base.gcpause import collector_paused
from forensics.cli import run
from forensics.db import connect
from forensics.ingest import load


@pytest.fixture(autouse=True)
def collector_on():
    """Each test starts with the collector on, and leaves it as it found it."""
    was_on = gc.isenabled()
    gc.enable()
    yield
    if not was_on:
        gc.disable()


def test_the_block_turns_the_collector_off_and_back_as_it_was() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # inside another: off, and still off after
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()  # off before: stays off
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_failure_in_the_block_turns_it_back_on() -> None:
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_the_cycles_made_in_the_block_are_collected_after_it() -> None:
    class Node:
        other: object

    with collector_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("external", [False, True], ids=["loaded", "external"])
def test_the_analysis_runs_with_the_collector_off(
    tmp_path: Path, monkeypatch, external: bool
) -> None:
    case = hive_sample(tmp_path)
    db = tmp_path / "case.duckdb"
    assert run(["ingest", str(case), "--db", str(db), *(["--ledger-external"] * external)]) == 0
    seen: list[tuple[str, bool]] = []
    find = order.find_on_node

    def watched(ev):  # in the sweep's threads, and the warm-up's
        seen.append((threading.current_thread().name, gc.isenabled()))
        return find(ev)

    monkeypatch.setattr(order, "find_on_node", watched)
    con = connect(db)
    try:
        analyze(con, progress=lambda *_: seen.append(("progress", gc.isenabled())))
    finally:
        con.close()
    assert gc.isenabled()
    threads = {name for name, _ in seen}
    assert len(threads) >= 3, threads  # the driver's progress, the warm-up, the sweep's threads
    assert not any(on for _, on in seen), seen


def test_a_failed_analysis_turns_it_back_on(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "case.duckdb"
    assert run(["ingest", str(hive_sample(tmp_path)), "--db", str(db)]) == 0

    def fails(_ev):
        raise RuntimeError("the sweep failed")

    monkeypatch.setattr(order, "find_on_node", fails)
    con = connect(db)
    try:
        with pytest.raises(RuntimeError, match="the sweep failed"):
            analyze(con)
    finally:
        con.close()
    assert gc.isenabled()


def test_ingest_runs_with_the_collector_off(tmp_path: Path, monkeypatch) -> None:
    seen: list[bool] = []
    record = load._record

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return record(*args, **kwargs)

    monkeypatch.setattr(load, "_record", watched)
    assert run(["ingest", str(hive_sample(tmp_path)), "--db", str(tmp_path / "c.duckdb")]) == 0
    assert seen == [False]
    assert gc.isenabled()
