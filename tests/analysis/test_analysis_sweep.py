"""The compiled sweep against the naive per-slot oracle, event by event and slot by slot."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from support import oracle
from support.strategies import busy_ledger, ledger

from forensics.analysis import sweep
from forensics.analysis.buffers import Pieces
from forensics.analysis.sweep import CATEGORIES, EXPOSURE_KINDS, OPS, VIOLATIONS, sweep_node


def _codes(values: list) -> tuple[np.ndarray, list]:
    names = sorted({v for v in values if v is not None})
    index = {v: i for i, v in enumerate(names)}
    return np.array([index[v] if v is not None else -1 for v in values], np.int64), names


def _sweep_facts(node: str, evs: list[dict]) -> tuple[set, set]:
    req, names = _codes([e["request_id"] for e in evs])
    hsh, _ = _codes([e["content_hash"] for e in evs])
    ex, cat, vio = sweep_node(
        req,
        np.array([OPS.index(e["op"]) for e in evs]),
        np.array([e["slot_start"] for e in evs]),
        np.array([e["slot_count"] for e in evs]),
        hsh,
    )
    reads = set()
    for t, category, s0, s1 in cat:
        if CATEGORIES[category] != "foreign":
            reads |= {(node, int(t), s, CATEGORIES[category], -1) for s in range(s0, s1)}
    for t, s0, s1, w, kind in ex:
        reads |= {(node, int(t), s, EXPOSURE_KINDS[kind], int(w)) for s in range(s0, s1)}
    viol = {
        (node, int(t), s, VIOLATIONS[k], names[o] if o >= 0 else None)
        for t, s0, s1, k, o in vio
        for s in range(s0, s1)
    }
    return reads, viol


def _assert_sweep_matches_oracle(events: list[dict]) -> None:
    """Per read and per violation, the sweep's facts over every node equal the oracle's."""
    facts = oracle.run(events)
    reads: set = set()
    viol: set = set()
    for node, evs in oracle.ordered(events).items():
        r, v = _sweep_facts(node, evs)
        reads |= r
        viol |= v
    assert reads == facts.per_read
    assert viol == facts.per_violation


@settings(max_examples=300, deadline=None)
@given(ledger())
def test_sweep_matches_oracle_per_slot(events: list[dict]) -> None:
    _assert_sweep_matches_oracle(events)


def test_foreign_category_covers_exactly_the_exposures() -> None:
    evs = [
        {"request_id": "A", "op": "alloc", "slot_start": 0, "slot_count": 4, "content_hash": None},
        {"request_id": "A", "op": "write", "slot_start": 0, "slot_count": 4, "content_hash": None},
        {"request_id": "A", "op": "free", "slot_start": 0, "slot_count": 4, "content_hash": None},
        {"request_id": "B", "op": "alloc", "slot_start": 0, "slot_count": 4, "content_hash": None},
        {"request_id": "B", "op": "write", "slot_start": 0, "slot_count": 1, "content_hash": None},
        {"request_id": "B", "op": "read", "slot_start": 0, "slot_count": 4, "content_hash": None},
    ]
    reads, viol = _sweep_facts("n", [dict(e, ts=0, node="n") for e in evs])
    assert {(s, k) for (_, t, s, k, _) in reads} == {
        (0, "own"),
        (1, "stale"),
        (2, "stale"),
        (3, "stale"),
    }
    assert viol == set()


@settings(max_examples=200, deadline=None)
@given(busy_ledger())
def test_sweep_matches_oracle_on_busy_ledgers(events: list[dict]) -> None:
    _assert_sweep_matches_oracle(events)


@settings(max_examples=60, deadline=None)
@given(busy_ledger())
def test_sweep_matches_oracle_when_its_buffers_start_tiny(events: list[dict]) -> None:
    """Every output buffer starts with one row, so nearly every event that adds rows runs out
    of room, has its buffers grown and runs again: the pieces must still match the oracle."""

    def tiny(_cat_rows: int) -> Pieces:
        return Pieces(
            np.empty((1, 5), np.int64),
            np.empty((1, 4), np.int32),
            np.empty((1, 5), np.int64),
            np.zeros(3, np.int64),
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweep, "new_pieces", tiny)
        _assert_sweep_matches_oracle(events)


@settings(max_examples=60, deadline=None)
@given(busy_ledger())
def test_sweep_matches_oracle_when_its_holder_pools_start_tiny(events: list[dict]) -> None:
    """Both holder pools start with 16 entries, so allocations keep running out of room: the
    event loop stops, the pools are compacted and grown, and the loop goes on from that
    event. The pieces must still match the oracle."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweep, "POOL_START", 1)
        _assert_sweep_matches_oracle(events)


@settings(max_examples=60, deadline=None)
@given(busy_ledger())
def test_sweep_matches_oracle_when_it_runs_a_few_events_at_a_time(events: list[dict]) -> None:
    """The sweep runs its events in stretches, looking for Ctrl-C between them; stretches of
    three events (with the buffers and pools starting tiny, so that stretches end beside the
    stops for room) must give the oracle's pieces too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweep, "STRETCH", 3)
        patch.setattr(sweep, "POOL_START", 1)
        _assert_sweep_matches_oracle(events)


def test_a_sweep_stops_between_stretches_once_ctrl_c_came(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Compiled code cannot be interrupted: the sweep looks for Ctrl-C between stretches of
    events and stops there, with an error the command line reports as an interrupt."""
    from forensics.casedb import interrupts
    from forensics.errors import Interrupted, interrupted

    looks: list[int] = []

    def ctrl_c_at_the_second_look() -> None:
        looks.append(1)
        if len(looks) == 2:
            interrupts._STOP.set()  # what a Ctrl-C sets while a command runs
        interrupts.stop_if_interrupted()

    monkeypatch.setattr(sweep, "STRETCH", 2)
    monkeypatch.setattr(sweep, "stop_if_interrupted", ctrl_c_at_the_second_look)
    req = np.repeat(np.arange(3), 4)
    op = np.array([OPS.index(o) for o in ("alloc", "write", "read", "free")] * 3)
    try:
        with pytest.raises(Interrupted) as raised:
            sweep_node(req, op, np.zeros(12, np.int64), np.full(12, 4), np.full(12, -1))
    finally:
        interrupts._STOP.clear()
    assert interrupted(raised.value)
    assert len(looks) == 2  # stopped at once, not at the end of the node
