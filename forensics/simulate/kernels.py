"""Compiled inner loops of the simulator (numba): page allocation and release, and writing
ledger rows straight into the EventBuffer's column arrays. Each function does what its
docstring says and nothing else; the Python side reserves room before calling."""

from __future__ import annotations

import numpy as np
from numba import njit

ALLOC, WRITE, READ = 1, 3, 4
SRC_DECODE = 2


@njit(cache=True)
def pop_pages(stack, top, refs, k):  # type: ignore[no-untyped-def]
    """Pop k pages from the top of the LIFO stack (the top first); count one holder each."""
    pages = np.empty(k, np.int64)
    for j in range(k):
        p = stack[top - 1 - j]
        pages[j] = p
        refs[p] += 1
    return pages


@njit(cache=True)
def push_pages(stack, top, refs, pages):  # type: ignore[no-untyped-def]
    """Drop one holder of each page; pages left unheld go on top, pages[0] ending on top.
    Returns the new top."""
    free = np.empty(len(pages), np.int64)
    n = 0
    for p in pages:
        refs[p] -= 1
        if refs[p] == 0:
            free[n] = p
            n += 1
    for j in range(n):
        stack[top + j] = free[n - 1 - j]
    return top + n


@njit(cache=True)
def _row(data, n, emit, ts, node, rid, op, start, count, pos, src, h):  # type: ignore[no-untyped-def]
    data[0, n] = ts
    data[1, n] = node
    data[2, n] = rid
    data[3, n] = op
    data[4, n] = start
    data[5, n] = count
    data[6, n] = pos
    data[7, n] = src
    data[8, n] = h
    data[9, n] = emit


@njit(cache=True)
def emit_runs(data, n, emit0, pages, p0, p1, ps, ts, node, rid, op, src, h):  # type: ignore[no-untyped-def]
    """One row per contiguous slot run holding positions [p0, p1) of a sequence laid out on
    `pages`. Returns the new row count."""
    pos = p0
    i = p0 // ps
    last = (p1 - 1) // ps
    while pos < p1:
        j = i
        while j < last and pages[j + 1] == pages[j] + 1:
            j += 1
        end = min((j + 1) * ps, p1)
        slot = pages[i] * ps + (pos - i * ps)
        _row(data, n, emit0 + n, ts, node, rid, op, slot, end - pos, pos, src, h)
        n += 1
        pos = end
        i = j + 1
    return n


@njit(cache=True)
def emit_steps(data, n, emit0, pages, first_new, prompt, end, t, tpot, ps, node, rid):  # type: ignore[no-untyped-def]
    """Decode steps writing positions [prompt, end): the alloc of each page from first_new on
    at the step that first uses it, then per step a decode write and a read of that slot."""
    for g in range(first_new, len(pages)):
        first = g * ps
        _row(
            data,
            n,
            emit0 + n,
            t + (first - prompt + 1) * tpot,
            node,
            rid,
            ALLOC,
            pages[g] * ps,
            ps,
            first,
            0,
            -1,
        )
        n += 1
    for pos in range(prompt, end):
        ts = t + (pos - prompt + 1) * tpot
        slot = pages[pos // ps] * ps + pos % ps
        _row(data, n, emit0 + n, ts, node, rid, WRITE, slot, 1, pos, SRC_DECODE, -1)
        _row(data, n + 1, emit0 + n + 1, ts + 1, node, rid, READ, slot, 1, pos, 0, -1)
        n += 2
    return n
