"""A holder set of one holder is kept in the holder map itself, as a negative id packing the
request code and the acquiring event (forensics.analysis.holders.single): the packing must give
both back at their extremes, never collide with the empty set or a pool id, and a node with more
events than the ids can name is refused rather than mis-attributed."""

from __future__ import annotations

import numpy as np
import pytest

import forensics.analysis.sweep as sweep
from forensics.analysis.codes import ALLOC, READ, WRITE
from forensics.analysis.holders import (
    EMPTY_SET,
    MAX_EVENTS,
    SINGLE,
    held_since,
    new_pool,
    set_entries,
    single,
    single_holder,
    single_since,
)
from forensics.analysis.sweep import Cells


@pytest.mark.parametrize(
    ("r", "acq"),
    [(0, 0), (1, 0), (0, 1), (SINGLE - 1, 0), (0, MAX_EVENTS - 1), (SINGLE - 1, MAX_EVENTS - 1)],
)
def test_a_single_holder_id_gives_back_its_request_and_event(r: int, acq: int) -> None:
    sid = single(r, acq)
    assert sid < EMPTY_SET
    assert (single_holder(sid), single_since(sid)) == (r, acq)
    pool = new_pool(16)
    assert set_entries(pool, sid) == [(r, acq)]
    assert held_since(pool.ent, pool.sets, sid, r) == acq
    other = r - 1 if r else r + 1
    assert held_since(pool.ent, pool.sets, sid, other) == -1


def test_single_holder_ids_are_distinct() -> None:
    rng = np.random.default_rng(3)
    pairs = {
        (int(r), int(a))
        for r, a in zip(
            rng.integers(0, SINGLE, 5000), rng.integers(0, MAX_EVENTS, 5000), strict=True
        )
    }
    assert len({single(r, a) for r, a in pairs}) == len(pairs)


def test_a_node_with_more_events_than_the_ids_can_name_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(sweep, "MAX_EVENTS", 4)
    req = np.array([0, 0, 1, 1], np.int32)
    op = np.array([ALLOC, WRITE, ALLOC, READ], np.int8)
    cells = Cells(np.arange(3, dtype=np.int64), np.zeros(4, np.int32), np.ones(4, np.int32))
    with pytest.raises(ValueError, match="events on one node"):
        sweep.sweep_cells_of(req, op, cells, np.full(4, -1, np.int32))
    monkeypatch.setattr(sweep, "MAX_EVENTS", 5)
    ex, _, vio = sweep.sweep_cells_of(req, op, cells, np.full(4, -1, np.int32))
    assert len(vio) == 1  # request 1's alloc over cells request 0 holds: a double allocation
