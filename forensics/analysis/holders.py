"""Holder sets for the compiled sweep: who holds a run of cells, and since which event.

A holder set is an immutable, request-sorted list of (request code, acquisition event index)
entries stored in a pool: `ent[i] = (request, acquired_at)`, `sets[sid] = (offset, length)`,
`cnt = [entries used, sets used, longest set so far]`. Set 0 is the empty set. Changing the
holders of a run makes a new set (copy on write), so runs that split share their set. When the
pool is full it is first compacted to the sets still referenced by the holder map, then grown.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from forensics.analysis.buffers import grown
from forensics.analysis.runmap import bs_clear, bs_next, bs_prev, rm_split


def new_pool(capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ent = np.zeros((max(16, capacity), 2), dtype=np.int64)
    sets = np.zeros((max(16, capacity), 2), dtype=np.int64)
    cnt = np.array([0, 1, 0], dtype=np.int64)  # used entries, used sets (0: empty), max length
    return ent, sets, cnt


@njit(cache=True, nogil=True)
def set_find(ent, sets, sid, r):
    """Entry index of request r in set sid, or -1."""
    off = sets[sid, 0]
    for i in range(off, off + sets[sid, 1]):
        if ent[i, 0] == r:
            return i
    return -1


@njit(cache=True, nogil=True)
def set_equal(ent, sets, s1, s2):
    if s1 == s2:
        return True
    n = sets[s1, 1]
    if n != sets[s2, 1]:
        return False
    o1 = sets[s1, 0]
    o2 = sets[s2, 0]
    for i in range(n):
        if ent[o1 + i, 0] != ent[o2 + i, 0] or ent[o1 + i, 1] != ent[o2 + i, 1]:
            return False
    return True


@njit(cache=True, nogil=True)
def set_with(ent, sets, cnt, sid, r, acq):
    """The set sid with r held since acq (replacing r's entry). The pool must have room."""
    i = set_find(ent, sets, sid, r)
    if i >= 0 and ent[i, 1] == acq:
        return sid
    off = sets[sid, 0]
    n = sets[sid, 1]
    new_off = cnt[0]
    k = new_off
    placed = False
    for j in range(off, off + n):
        if ent[j, 0] == r:
            continue
        if not placed and ent[j, 0] > r:
            ent[k, 0] = r
            ent[k, 1] = acq
            k += 1
            placed = True
        ent[k, 0] = ent[j, 0]
        ent[k, 1] = ent[j, 1]
        k += 1
    if not placed:
        ent[k, 0] = r
        ent[k, 1] = acq
        k += 1
    return _close_set(sets, cnt, new_off, k)


@njit(cache=True, nogil=True)
def set_without(ent, sets, cnt, sid, r):
    """The set sid without r. The pool must have room."""
    if set_find(ent, sets, sid, r) < 0:
        return sid
    if sets[sid, 1] == 1:
        return 0
    off = sets[sid, 0]
    new_off = cnt[0]
    k = new_off
    for j in range(off, off + sets[sid, 1]):
        if ent[j, 0] != r:
            ent[k, 0] = ent[j, 0]
            ent[k, 1] = ent[j, 1]
            k += 1
    return _close_set(sets, cnt, new_off, k)


@njit(cache=True, nogil=True)
def _close_set(sets, cnt, off, end):
    sid = cnt[1]
    sets[sid, 0] = off
    sets[sid, 1] = end - off
    cnt[0] = end
    cnt[1] = sid + 1
    cnt[2] = max(cnt[2], end - off)
    return sid


@njit(cache=True, nogil=True)
def pool_reserve(ent, sets, cnt, need_ent, need_sets, words, offs, nlev, val, n):
    """Make room for need_ent entries and need_sets sets: compact, then grow if still short."""
    if cnt[0] + need_ent <= ent.shape[0] and cnt[1] + need_sets <= sets.shape[0]:
        return ent, sets
    remap = np.full(cnt[1], -1, dtype=np.int64)
    remap[0] = 0
    new_ent = np.empty((max(ent.shape[0], 16), 2), dtype=np.int64)
    new_sets = np.empty((max(sets.shape[0], 16), 2), dtype=np.int64)
    new_sets[0, 0] = 0
    new_sets[0, 1] = 0
    ne = 0
    ns = 1
    j = 0
    while j < n:
        sid = val[j]
        if remap[sid] < 0:
            length = sets[sid, 1]
            if ne + length > new_ent.shape[0]:
                new_ent = grown(new_ent, ne, 2 * (ne + length))
            if ns + 1 > new_sets.shape[0]:
                new_sets = grown(new_sets, ns, 2 * (ns + 1))
            off = sets[sid, 0]
            for i in range(length):
                new_ent[ne + i, 0] = ent[off + i, 0]
                new_ent[ne + i, 1] = ent[off + i, 1]
            new_sets[ns, 0] = ne
            new_sets[ns, 1] = length
            remap[sid] = ns
            ne += length
            ns += 1
        val[j] = remap[sid]
        j = bs_next(words, offs, nlev, j + 1, n)
    cnt[0] = ne
    cnt[1] = ns
    want_ent = 2 * (ne + need_ent)
    want_sets = 2 * (ns + need_sets)
    if want_ent > new_ent.shape[0]:
        new_ent = grown(new_ent, ne, want_ent)
    if want_sets > new_sets.shape[0]:
        new_sets = grown(new_sets, ns, want_sets)
    return new_ent, new_sets


@njit(cache=True, nogil=True)
def count_runs(words, offs, nlev, a, b, n):
    """How many runs of the map meet [a, b)."""
    k = 1
    j = bs_next(words, offs, nlev, a + 1, n)
    while j < b:
        k += 1
        j = bs_next(words, offs, nlev, j + 1, n)
    return k


@njit(cache=True, nogil=True)
def update_holders(hmap, ent, sets, cnt, a, b, r, acq, n):
    """Add r, held since acq, to the holder sets of [a, b) (acq < 0 removes r), then merge
    runs whose sets became equal. Returns the (possibly reallocated) pool arrays."""
    hw, ho, hn, hv = hmap
    runs = b - a + 2  # at most one new set per cell: count the runs only when that is short
    if cnt[0] + runs * (cnt[2] + 1) > ent.shape[0] or cnt[1] + runs > sets.shape[0]:
        runs = count_runs(hw, ho, hn, a, b, n) + 2
        ent, sets = pool_reserve(ent, sets, cnt, runs * (cnt[2] + 1), runs, hw, ho, hn, hv, n)
    rm_split(hw, ho, hn, hv, a, n)
    rm_split(hw, ho, hn, hv, b, n)
    x = a
    while x < b:
        nx = bs_next(hw, ho, hn, x + 1, n)
        if acq >= 0:
            hv[x] = set_with(ent, sets, cnt, hv[x], r, acq)
        else:
            hv[x] = set_without(ent, sets, cnt, hv[x], r)
        x = nx
    prev_sid = hv[bs_prev(hw, ho, hn, a - 1)] if a > 0 else -1
    x = a
    while x <= b and x < n:
        nx = bs_next(hw, ho, hn, x + 1, n)
        if prev_sid >= 0 and set_equal(ent, sets, prev_sid, hv[x]):
            bs_clear(hw, ho, hn, x)
        else:
            prev_sid = hv[x]
        x = nx
    return ent, sets
