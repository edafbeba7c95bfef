"""An ordered run map over a node's compressed slot cells, for the compiled sweep.

A run map splits the cells `[0, n)` into maximal runs (run-length encoding), each with one int64
value: the sweep keeps the last writer, the last write and the holder sets this way, so updating
a range costs the runs it touches, never its length in cells. Run starts are kept in a
hierarchical 64-ary bitset, so finding the run that contains a cell, the next run start,
splitting a run or wiping every start inside a range costs O(log64 n) per start touched.
Cell 0 is always a run start.

Kernels take a RunMap; the bit-set helpers (bs_*, rm_split) take the arrays they touch, which
callers read out of the map once, before their loops: they run several times per event. The
bit set is one array (RunMap.words) that also says where each of its levels starts, so that a
helper takes one array where it took three arguments: a compiled call passes an array as seven
machine words, and with the levels' offsets in an array of their own, passing the arguments of
these calls took a quarter of the sweep's event loop (the sweep of the 11 M-event bench mixes
is a sixth faster without them).

Everything the sweep's event loop calls is compiled with `_nrt=False` (no reference counting;
see forensics.analysis.sweep.sweep_until): such a kernel must not make an array, only read and
write those its caller owns.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba.cpython.unsafe import numbers

import forensics.base.jitcache  # noqa: F401  (a stale compiled-code cache is recompiled)
from forensics.analysis.compiled import inline_kernel, loop_kernel

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_ONE = np.uint64(1)
# Bit scans of a uint64 word, for compiled code only (typed Any: their static type is that of
# the compile-time hook): the lowest set bit of w is trailing_zeros(w), the highest is
# 63 - leading_zeros(w).
trailing_zeros: Any = numbers.trailing_zeros
leading_zeros: Any = numbers.leading_zeros


class RunMap(NamedTuple):
    """The runs of one map (a tuple of arrays, so compiled code takes it as one argument)."""

    # Bit-packed run starts: bit c of level 0 is set when a run starts at cell c; bit k of
    # level L + 1 is set when word k of level L is not zero, so empty stretches are skipped
    # 64 words at a time. Every level lives in this one uint64 array after a header of HEADER
    # words: words[0] is the number of levels (the top level is a single word) and
    # words[1 + L] where level L starts (level 0 at HEADER), up to the end of the last level
    # (see the module docstring for why).
    words: np.ndarray
    # Run-length values: val[c] is the value of the run starting at c. Cells that start no run
    # keep stale values, read only once a split makes them a start (rm_split copies the value).
    val: np.ndarray
    n: int  # cells; bs_next answers n for "no run start after i" (a sentinel, not a cell)


# Header words before the levels: the levels' count and where each starts and the last ends.
# A node's cells are fewer than 2^31 (int32), so there are at most 6 levels.
HEADER = 8


def new_map(n: int, value: int) -> RunMap:
    """A map over n cells holding one run [0, n) with `value`."""
    sizes = []
    size = max(1, n)
    while True:
        size = (size + 63) // 64
        sizes.append(size)
        if size == 1:
            break
    if len(sizes) + 2 > HEADER:
        raise ValueError(f"{n:,} cells are more than a run map holds")
    words = np.zeros(HEADER + sum(sizes), dtype=np.uint64)
    words[0] = len(sizes)
    words[1 : len(sizes) + 2] = HEADER + np.concatenate([[0], np.cumsum(sizes)])
    val = np.full(max(1, n) + 1, value, dtype=np.int64)
    bs_set(words, 0)
    return RunMap(words, val, max(1, n))


@inline_kernel
def _level(words, lev):  # type: ignore[no-untyped-def]
    """Where level lev starts in words (lev = the levels' count: where the last one ends)."""
    return np.int64(words[1 + lev])


@loop_kernel
def bs_test(words, i):  # type: ignore[no-untyped-def]
    """Whether a run starts at cell i."""
    return (words[HEADER + (i >> 6)] >> np.uint64(i & 63)) & _ONE != 0


@loop_kernel
def bs_set(words, i):  # type: ignore[no-untyped-def]
    """Make i a run start; upper levels get their bit only when the word below was empty."""
    idx = i
    for lev in range(np.int64(words[0])):
        w = _level(words, lev) + (idx >> 6)
        was = words[w]
        words[w] = was | (_ONE << np.uint64(idx & 63))
        if was != 0:
            return
        idx = idx >> 6


@loop_kernel
def bs_clear(words, i):  # type: ignore[no-untyped-def]
    """Make i no run start; upper levels lose their bit only when the word below empties."""
    idx = i
    for lev in range(np.int64(words[0])):
        w = _level(words, lev) + (idx >> 6)
        words[w] = words[w] & ~(_ONE << np.uint64(idx & 63))
        if words[w] != 0:
            return
        idx = idx >> 6


@loop_kernel
def bs_next(words, i, n):  # type: ignore[no-untyped-def]
    """Smallest run start >= i, or n (the map's cells) when there is none."""
    return _next(words, i, n)


@loop_kernel
def bs_prev(words, i):  # type: ignore[no-untyped-def]
    """Largest run start <= i (the start of the run holding cell i), or -1 when there is none."""
    return _prev(words, i)


@inline_kernel
def bs_around(words, i, n):  # type: ignore[no-untyped-def]
    """(bs_prev(words, i), bs_next(words, i + 1, n)) at once: where the run holding cell i
    starts, and where the next one does (n: none). A walk along a range's runs starts so, at
    every read and write; inlined there (forensics.analysis.compiled)."""
    return _prev(words, i), _next(words, i + 1, n)


@inline_kernel
def _next(words, i, n):  # type: ignore[no-untyped-def]
    """bs_next's walk, inlined in bs_next and bs_around."""
    if i >= n:
        return n
    nlev = np.int64(words[0])
    idx = i
    lev = 0
    while lev < nlev:  # climb until a word has a set bit at or after idx
        w = idx >> 6
        at = _level(words, lev) + w
        if at >= _level(words, lev + 1):
            return n
        bits = words[at] & (_ALL << np.uint64(idx & 63))
        if bits != 0:
            idx = (w << 6) + trailing_zeros(bits)
            break
        idx = w + 1
        lev += 1
    if lev == nlev:
        return n
    while lev > 0:  # descend along the lowest set bit of each word
        lev -= 1
        idx = (idx << 6) + trailing_zeros(words[_level(words, lev) + idx])
    return min(idx, n)


@inline_kernel
def _prev(words, i):  # type: ignore[no-untyped-def]
    """bs_prev's walk, inlined in bs_prev and bs_around."""
    nlev = np.int64(words[0])
    idx = i
    lev = 0
    while lev < nlev:  # climb until a word has a set bit at or before idx
        if idx < 0:
            return -1
        w = idx >> 6
        bits = words[_level(words, lev) + w] & (_ALL >> np.uint64(63 - (idx & 63)))
        if bits != 0:
            idx = (w << 6) + 63 - leading_zeros(bits)
            break
        idx = w - 1
        lev += 1
    if lev == nlev:
        return -1
    while lev > 0:  # descend along the highest set bit of each word
        lev -= 1
        idx = (idx << 6) + 63 - leading_zeros(words[_level(words, lev) + idx])
    return idx


@loop_kernel
def rm_split(words, val, x, n):  # type: ignore[no-untyped-def]
    """Make x a run start of the map (words, val) over n cells, the new run keeping
    the value of the run it splits (no-op at n or when x already starts a run)."""
    if x >= n or bs_test(words, x):
        return
    val[x] = val[bs_prev(words, x)]
    bs_set(words, x)


@inline_kernel
def rm_assign(m: RunMap, a: int, b: int, v: int) -> None:
    """Give [a, b) the value v, merging with equal neighbours."""
    words, val, n = m.words, m.val, m.n
    rm_split(words, val, a, n)
    rm_split(words, val, b, n)
    j = bs_next(words, a + 1, n)
    while j < b:  # wipe the run starts inside (a, b)
        bs_clear(words, j)
        j = bs_next(words, j + 1, n)
    val[a] = v
    if b < n and val[b] == v:
        bs_clear(words, b)
    if a > 0 and val[bs_prev(words, a - 1)] == v:
        bs_clear(words, a)
