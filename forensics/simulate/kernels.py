"""Compiled inner loops of the simulator (numba): writing ledger rows straight into the
EventBuffer's column arrays (the page pools' own loops are in forensics.engines.pool_kernels).
Each function does what its docstring says and nothing else; the Python side reserves room
before calling.

The row writers take a template column, `row`: one event's fields in ledger.FIELDS order, from
which they copy every field they do not compute (one small array rather than a dozen scalar
arguments: numba passes an array from Python as cheaply as an integer)."""

from __future__ import annotations

from numba import njit

import forensics.base.jitcache  # noqa: F401  (a stale compiled-code cache is recompiled)

ALLOC, WRITE, READ = 1, 3, 4
SRC_NONE, SRC_DECODE = 0, 2
NO_HASH = -1  # the hash field of events without a content hash
# Rows of the EventBuffer matrix (ledger.FIELDS order). In a template column, EMIT holds the
# emission number of column 0 of the matrix, so column n gets row[EMIT] + n.
TS, NODE, RID, OP, START, COUNT, POS, SRC, HASH, EMIT = range(10)


@njit(cache=True)
def _put(data, n, row, slot, count, pos):  # type: ignore[no-untyped-def]
    """Column n: the template row for `count` slots from `slot`, holding positions from pos."""
    for f in range(data.shape[0]):
        data[f, n] = row[f]
    data[START, n] = slot
    data[COUNT, n] = count
    data[POS, n] = pos
    data[EMIT, n] = row[EMIT] + n


@njit(cache=True)
def emit_runs(data, n, row, pages, ps, p0, p1):  # type: ignore[no-untyped-def]
    """One column per contiguous slot run holding positions [p0, p1) of a sequence laid out on
    `pages` of ps slots (position p is in slot pages[p // ps] * ps + p % ps), from column n on,
    each a copy of the template row. Returns the new column count."""
    pos = p0
    i = p0 // ps
    last = (p1 - 1) // ps
    while pos < p1:
        j = i
        while j < last and pages[j + 1] == pages[j] + 1:  # adjacent pages: one slot run
            j += 1
        end = min((j + 1) * ps, p1)
        _put(data, n, row, pages[i] * ps + (pos - i * ps), end - pos, pos)
        n += 1
        pos = end
        i = j + 1
    return n


@njit(cache=True)
def emit_steps(data, n, row, pages, ps, first_new, prompt, end, tpot):  # type: ignore[no-untyped-def]
    """Decode steps writing positions [prompt, end) of a sequence laid out on `pages` of ps
    slots, the step of position p at time row[TS] + (p - prompt + 1) * tpot: the alloc of each
    page from first_new on at the step that first uses it, then per step a decode write and,
    1 µs later, a read of that slot. Fields other than time, op, source and hash come from the
    template row. Returns the new column count."""
    t = row[TS]
    for g in range(first_new, len(pages)):
        first = g * ps
        _put(data, n, row, pages[g] * ps, ps, first)
        _stamp(data, n, t + (first - prompt + 1) * tpot, ALLOC, SRC_NONE)
        n += 1
    for pos in range(prompt, end):
        ts = t + (pos - prompt + 1) * tpot
        slot = pages[pos // ps] * ps + pos % ps
        _put(data, n, row, slot, 1, pos)
        _stamp(data, n, ts, WRITE, SRC_DECODE)
        _put(data, n + 1, row, slot, 1, pos)
        _stamp(data, n + 1, ts + 1, READ, SRC_NONE)
        n += 2
    return n


@njit(cache=True)
def _stamp(data, n, ts, op, src):  # type: ignore[no-untyped-def]
    """Set column n's time, op and source (decode-step events carry no content hash)."""
    data[TS, n] = ts
    data[OP, n] = op
    data[SRC, n] = src
    data[HASH, n] = NO_HASH
