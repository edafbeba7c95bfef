"""The sweep's memory budget (forensics.analysis.budget): sizes as DuckDB writes them, and
nodes held at once only while they fit."""

from __future__ import annotations

import threading
import time

import duckdb
import pytest

from forensics.analysis.budget import (
    MemoryBudget,
    memory_limit,
    reset_limit,
    size_bytes,
    sweep_budget,
)
from forensics.db import connect


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.7 GiB", int(3.7 * 2**30)),
        ("95.3 MiB", int(95.3 * 2**20)),
        ("512MB", 512 * 10**6),
        ("1048576KiB", 2**30),
        ("4GB", 4 * 10**9),
        ("17 bytes", 17),
    ],
)
def test_sizes_as_duckdb_writes_them(text: str, expected: int) -> None:
    assert size_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "4 parsecs", "-1GB"])
def test_what_is_no_size_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        size_bytes(text)


def _duckdb_limit(con: duckdb.DuckDBPyConnection) -> int:
    return size_bytes(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])


def test_duckdb_gets_its_share_during_the_sweep_and_its_limit_back_after() -> None:
    con = connect(":memory:", memory_limit="4GB")
    assert memory_limit(con) == 4 * 10**9  # exactly as given, not as DuckDB rounds it
    before = _duckdb_limit(con)
    for _ in range(3):  # again and again on one connection: no drift
        with sweep_budget(con) as budget:
            during = _duckdb_limit(con)
            assert during == pytest.approx(10**9, rel=0.02)
            assert budget.total == 4 * 10**9 - 10**9
        assert _duckdb_limit(con) == before
    small = connect(":memory:", memory_limit="64MB")
    with sweep_budget(small) as budget:  # below DuckDB's floor: DuckDB keeps it all
        assert _duckdb_limit(small) == pytest.approx(64 * 10**6, rel=0.02)
        assert budget.total == 1  # so the sweep holds one node at a time


def test_nodes_are_held_together_only_while_they_fit() -> None:
    """Three nodes of 40, 40 and 30 bytes in a budget of 100: the third waits until one of
    the first two gives its share back; a node bigger than the budget waits for all."""
    budget = MemoryBudget(100)
    log: list[str] = []
    budget.take(40)
    budget.take(40)
    started = threading.Event()

    def third() -> None:
        started.set()
        budget.take(30)
        log.append("third took")

    worker = threading.Thread(target=third)
    worker.start()
    started.wait()
    time.sleep(0.1)
    assert log == []  # 40 + 40 + 30 > 100: it waits
    log.append("first gave")
    budget.give(40)
    worker.join(timeout=5)
    assert log == ["first gave", "third took"]
    assert budget.held == 70
    assert budget.need(10**12) == 100  # a node bigger than the budget needs all of it
    budget.give(40)
    budget.give(30)
    budget.take(budget.need(10**12))  # nothing held: it goes at once, alone
    assert budget.held == 100


def test_an_error_in_the_sweep_is_reported_not_the_refused_reset() -> None:
    """A DuckDB error aborts the analysis' transaction, which then refuses to set the limit
    back: the sweep's own error must come out, not that refusal."""
    con = connect(":memory:", memory_limit="4GB")
    before = _duckdb_limit(con)
    con.begin()
    with pytest.raises(duckdb.BinderException), sweep_budget(con):
        con.execute("SELECT no_such_column FROM range(1)")
    con.rollback()
    assert _duckdb_limit(con) < before  # the aborted transaction refused to set it back
    reset_limit(con)  # as analyze does once it has rolled back
    assert _duckdb_limit(con) == before


class _Cluster:
    """What task_memory reads of a Ray session: its nodes, live or not, with their resources."""

    def __init__(self, nodes: list[tuple[bool, int]]) -> None:
        self._nodes = [{"Alive": alive, "Resources": {"memory": m, "CPU": 2}} for alive, m in nodes]

    def nodes(self) -> list[dict[str, object]]:
        return self._nodes


def test_a_ray_task_asks_for_its_memory_capped_at_the_largest_live_node() -> None:
    from forensics.base.raytasks import task_memory

    memory = task_memory(_Cluster([(True, 1000), (False, 9000), (True, 3000)]))
    assert memory(2000) == {"memory": 2000}
    assert memory(5000) == {"memory": 3000}  # bigger than every live node: runs alone there
    assert memory(0) == {"memory": 1}
    assert task_memory(_Cluster([]))(2000) == {}  # a cluster that reports no memory


def test_a_ray_task_needs_its_arrays_and_duckdb() -> None:
    from forensics.analysis.budget import (
        BYTES_PER_EVENT,
        BYTES_PER_NODE,
        DUCKDB_FLOOR,
        task_need,
    )

    assert task_need(10**6) == BYTES_PER_NODE + BYTES_PER_EVENT * 10**6 + DUCKDB_FLOOR
