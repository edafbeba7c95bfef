"""A node's slot ranges made into cells in their own arrays.

forensics.analysis.sweep.cells_of makes new arrays of cell numbers beside the slot ranges it
is given; for a node of tens of millions of events that is a third more memory at that moment
than the sweep itself holds. Where the ranges are int32 and a table over the node's slots
numbers the cells (the usual case: a KV pool reused again and again), the cell numbers are
written over the ranges instead; the result is the same Cells."""

from __future__ import annotations

import numpy as np
from numba import njit

import forensics.analysis.jitcache  # noqa: F401  (a stale compiled-code cache is recompiled)
from forensics.analysis.sweep import DENSE_SLOTS_MIN, DENSE_SLOTS_PER_RANGE, Cells, cells_of

_INT32_MAX = int(np.iinfo(np.int32).max)


def cells_in_place(start: np.ndarray, end: np.ndarray) -> Cells:
    """cells_of(start, end), with start and end becoming the cells' c0 and c1 where they are
    int32 and the table applies (they are not to be used as slots afterwards)."""
    if len(start) == 0 or start.dtype != np.int32 or end.dtype != np.int32:
        return cells_of(start, end)
    lo, hi = int(start.min()), int(end.max())
    base = lo if lo > hi - lo else 0  # as cells_of chooses it
    if hi - base >= min(DENSE_SLOTS_PER_RANGE * len(start) + DENSE_SLOTS_MIN, _INT32_MAX):
        return cells_of(start, end)
    mark = np.zeros(hi - base + 1, dtype=np.bool_)
    _mark(mark, start, base)
    _mark(mark, end, base)
    bounds = np.flatnonzero(mark).astype(np.int64, copy=False)
    number = np.cumsum(mark, dtype=np.int32)  # slot s -> marks at or before s
    del mark
    _renumber(start, number, base)
    _renumber(end, number, base)
    return Cells(bounds + base if base else bounds, start, end)


@njit(cache=True, nogil=True)
def _mark(mark, values, base):  # type: ignore[no-untyped-def]
    for i in range(values.shape[0]):
        mark[values[i] - base] = True


@njit(cache=True, nogil=True)
def _renumber(values, number, base):  # type: ignore[no-untyped-def]
    """Each slot (a range end) -> the cell it starts: the marks before it."""
    for i in range(values.shape[0]):
        values[i] = number[values[i] - base] - 1
