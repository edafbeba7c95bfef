"""Correct under memory pressure: with the memory limit far below the ledger's size the
analysis spills to disk, sweeps one node at a time, and gives exactly the same tables as with
the default budget (which sweeps two nodes at once)."""

from __future__ import annotations

import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from forensics.analysis import budget, order
from forensics.analysis.stage import analyze
from forensics.case.discover import discover
from forensics.db import connect
from forensics.ingest.load import ingest_into
from forensics.simulate.run import SimOptions, simulate

TABLES = {
    "exposures": "SELECT * EXCLUDE (confidence) FROM exposures ORDER BY ALL",
    "violations": "SELECT * FROM violations ORDER BY ALL",
    "read_stats": "SELECT * FROM read_stats ORDER BY ALL",
}


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    case = tmp_path_factory.mktemp("pressure") / "case"
    opts = SimOptions(
        requests=2000,
        seed=11,
        scale=0.02,
        truth=False,
        contents=False,
        bugs=frozenset({"oversize-stub", "late-transfer", "double-alloc"}),
        overrides=(("long_share", 0.3),),
    )
    simulate(case, opts)
    return case


def _tables(
    case: Path, db: Path, limit: str, patch: pytest.MonkeyPatch
) -> tuple[dict[str, list[tuple]], int, int]:
    """The tables, the ledger's events, and the most nodes swept at the same time."""
    con = connect(db, memory_limit=limit)
    con.execute("SET threads = 1")  # each thread pins its own buffers
    at_once = [0, 0]  # now, most
    lock = threading.Lock()
    find = order.find_on_node

    def counted(ev: order.NodeEvents) -> order.NodeFindings:
        if ev.node == order.WARM_UP_NODE:  # its six events, beside the first node's load
            return find(ev)
        with lock:
            at_once[0] += 1
            at_once[1] = max(at_once)
        time.sleep(0.2)  # long enough for a second node to start, if the budget lets it
        try:
            return find(ev)
        finally:
            with lock:
                at_once[0] -= 1

    patch.setattr(order, "find_on_node", counted)
    try:
        ingest_into(con, case, discover(case))
        events = con.execute("SELECT count(*) FROM kv_events").fetchone()[0]
        analyze(con)
        return {name: con.execute(q).fetchall() for name, q in TABLES.items()}, events, at_once[1]
    finally:
        con.close()


def test_same_answer_with_memory_limit_below_the_data(ledger, tmp_path, monkeypatch):
    tight, events, tight_at_once = _tables(ledger, tmp_path / "tight.duckdb", "64MB", monkeypatch)
    roomy, _, roomy_at_once = _tables(ledger, tmp_path / "roomy.duckdb", "4GB", monkeypatch)
    assert (tight_at_once, roomy_at_once) == (1, 2)
    # the ledger's ten numeric columns alone, uncompressed, exceed the tight budget
    assert events * 10 * 8 > 64 * 2**20, events
    assert tight["exposures"], "the scenario must produce exposures"
    assert tight == roomy


def test_the_budget_covers_a_node_at_its_worst_moment(ledger, tmp_path):
    """The budget's estimate of a node (order.need_of) against what its arrays take while it is
    loaded (tracemalloc sees numpy's and the compiled code's arrays alike): loading holds the
    node's columns once (codes and op, slot ranges; no rank, no key when its keys are dense),
    and the whole load and sweep stays within the estimate."""
    con = connect(tmp_path / "case.duckdb")
    try:
        ingest_into(con, ledger, discover(ledger))
        order.prepare_pieces(con)
        info = order.node_list(con)[0]
        order.find_on_node(order.load_node(con, info))  # compiled and warm
        tracemalloc.start()
        try:
            ev = order.load_node(con, info)
            loading = tracemalloc.get_traced_memory()[1]
            order.find_on_node(ev)
            del ev
            worst = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        con.close()
    assert info.dense_keys and info.events > 100_000
    slot_bytes = np.dtype(info.slot_dtype).itemsize
    columns = (budget.CODES + 2 * slot_bytes) * info.events
    assert columns <= loading <= 1.02 * columns, (loading, columns)
    assert worst <= order.need_of(info), (worst, order.need_of(info))
