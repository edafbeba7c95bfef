"""An ordered run map over a node's compressed slot cells, for the compiled sweep.

The map splits the cells `[0, n)` into maximal runs, each with one int64 value. Run starts are
kept in a hierarchical 64-ary bitset, so finding the run that contains a cell, the next run
start, splitting a run or wiping every start inside a range costs O(log64 n) per start touched:
an operation costs the runs it touches, never the length of the range.

A map is a tuple (words, offs, nlev, val): `words` holds every bitset level (level 0 first),
`offs[k]` is where level k starts in `words`, `val[c]` is the value of the run starting at c
(meaningful only where c is a run start). Cell 0 is always a run start.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_ONE = np.uint64(1)


def new_map(n: int, value: int) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """A map over n cells holding one run [0, n) with `value`."""
    sizes = []
    size = max(1, n)
    while True:
        size = (size + 63) // 64
        sizes.append(size)
        if size == 1:
            break
    offs = np.zeros(len(sizes) + 1, dtype=np.int64)
    offs[1:] = np.cumsum(sizes)
    words = np.zeros(int(offs[-1]), dtype=np.uint64)
    val = np.full(max(1, n) + 1, value, dtype=np.int64)
    bs_set(words, offs, len(sizes), 0)
    return words, offs, len(sizes), val


@njit(cache=True, nogil=True)
def bs_test(words, offs, _nlev, i):  # same arguments as the other bit-set kernels
    return (words[offs[0] + (i >> 6)] >> np.uint64(i & 63)) & _ONE != 0


@njit(cache=True, nogil=True)
def bs_set(words, offs, nlev, i):
    idx = i
    for lev in range(nlev):
        w = offs[lev] + (idx >> 6)
        was = words[w]
        words[w] = was | (_ONE << np.uint64(idx & 63))
        if was != 0:
            return
        idx = idx >> 6


@njit(cache=True, nogil=True)
def bs_clear(words, offs, nlev, i):
    idx = i
    for lev in range(nlev):
        w = offs[lev] + (idx >> 6)
        words[w] = words[w] & ~(_ONE << np.uint64(idx & 63))
        if words[w] != 0:
            return
        idx = idx >> 6


@njit(cache=True, nogil=True)
def bs_next(words, offs, nlev, i, n):
    """Smallest set index >= i, or n when there is none."""
    if i >= n:
        return n
    idx = i
    lev = 0
    while lev < nlev:
        w = idx >> 6
        if offs[lev] + w >= offs[lev + 1]:
            return n
        m = words[offs[lev] + w] & (_ALL << np.uint64(idx & 63))
        if m != 0:
            idx = (w << 6) + trailing_zeros(m)
            break
        idx = w + 1
        lev += 1
    if lev == nlev:
        return n
    while lev > 0:
        lev -= 1
        idx = (idx << 6) + trailing_zeros(words[offs[lev] + idx])
    return min(idx, n)


@njit(cache=True, nogil=True)
def bs_prev(words, offs, nlev, i):
    """Largest set index <= i, or -1 when there is none."""
    idx = i
    lev = 0
    while lev < nlev:
        if idx < 0:
            return -1
        w = idx >> 6
        m = words[offs[lev] + w] & (_ALL >> np.uint64(63 - (idx & 63)))
        if m != 0:
            idx = (w << 6) + 63 - leading_zeros(m)
            break
        idx = w - 1
        lev += 1
    if lev == nlev:
        return -1
    while lev > 0:
        lev -= 1
        idx = (idx << 6) + 63 - leading_zeros(words[offs[lev] + idx])
    return idx


@njit(cache=True, nogil=True)
def rm_split(words, offs, nlev, val, x, n):
    """Make x a run start (no-op at n or when it already is one)."""
    if x >= n or bs_test(words, offs, nlev, x):
        return
    p = bs_prev(words, offs, nlev, x)
    val[x] = val[p]
    bs_set(words, offs, nlev, x)


@njit(cache=True, nogil=True)
def rm_assign(words, offs, nlev, val, a, b, v, n):
    """Give [a, b) the value v, merging with equal neighbours."""
    rm_split(words, offs, nlev, val, a, n)
    rm_split(words, offs, nlev, val, b, n)
    j = bs_next(words, offs, nlev, a + 1, n)
    while j < b:
        bs_clear(words, offs, nlev, j)
        j = bs_next(words, offs, nlev, j + 1, n)
    val[a] = v
    if b < n and val[b] == v:
        bs_clear(words, offs, nlev, b)
    if a > 0 and val[bs_prev(words, offs, nlev, a - 1)] == v:
        bs_clear(words, offs, nlev, a)
