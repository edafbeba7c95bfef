"""Holder sets for the compiled sweep: who holds a run of cells, and since which event.

A holder set is an immutable, request-sorted list of (request code, acquisition event index)
entries. A holder map (Holders) is a run map whose values are set ids. A set of two holders or
more is stored in the map's HolderPool (its id: its place there, >= 1); the empty set is id 0
(EMPTY_SET); a set of one holder, what most cells have, is kept in the map value itself, as a
negative id (`single`), so that looking it up reads no pool. Each set has one id only: a set
becomes a single-holder id as soon as it is left with one holder. Changing the holders of a run
makes a new set (copy on write), so runs that split share their set. When the pool is full it is
first compacted to the sets still referenced by the holder map, then grown.

Kernels take a Holders map; the set helpers (set_*) take the pool arrays they touch, read out
of the pool once by their callers (see forensics.analysis.runmap for why).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from forensics.analysis.buffers import grown
from forensics.analysis.compiled import inline_kernel, loop_kernel
from forensics.analysis.runmap import RunMap, bs_clear, bs_next, bs_prev, rm_split

EMPTY_SET = 0  # set id 0 is always the empty set, so a fresh holder map (all 0) holds nobody
# A single holder's id packs its request code (below 2^31: codes are int32) and the event that
# acquired the holding (below MAX_EVENTS) into a negative int64.
SINGLE = 1 << 31
MAX_EVENTS = 1 << 32  # events of one node the single-holder ids can name


class HolderPool(NamedTuple):
    """Append-only storage of holder sets (compiled code takes it as one argument)."""

    # Entries of every set, back to back: ent[i] = [request code, event that acquired the
    # holding]; a set's entries are sorted by request code.
    ent: np.ndarray  # int64 (rows, 2)
    sets: np.ndarray  # int64 (rows, 2): set id -> [offset in ent, length]
    cnt: np.ndarray  # int64 [entries used, sets used, longest set so far], updated in place


class Holders(NamedTuple):
    """A holder map: cell runs -> set ids in `pool`."""

    runs: RunMap
    pool: HolderPool


def new_pool(capacity: int) -> HolderPool:
    """An empty pool with room for `capacity` entries and sets, holding only the empty set."""
    ent = np.zeros((max(16, capacity), 2), dtype=np.int64)
    sets = np.zeros((max(16, capacity), 2), dtype=np.int64)
    cnt = np.array([0, EMPTY_SET + 1, 0], dtype=np.int64)
    return HolderPool(ent, sets, cnt)


@loop_kernel
def single(r, acq):  # type: ignore[no-untyped-def]
    """The id of the set holding only r, since event acq (>= 0)."""
    return -1 - (acq * SINGLE + r)


@loop_kernel
def single_holder(sid):  # type: ignore[no-untyped-def]
    """The request of a single-holder set id (sid < 0)."""
    return (-1 - sid) % SINGLE


@loop_kernel
def single_since(sid):  # type: ignore[no-untyped-def]
    """The acquisition event of a single-holder set id (sid < 0)."""
    return (-1 - sid) // SINGLE


@loop_kernel
def held_since(ent, sets, sid, r):  # type: ignore[no-untyped-def]
    """The event since which set sid holds r, or -1 when it does not hold r."""
    if sid < 0:
        return single_since(sid) if single_holder(sid) == r else -1
    i = set_find(ent, sets, sid, r)
    return ent[i, 1] if i >= 0 else -1


def set_entries(pool: HolderPool, sid: int) -> list[tuple[int, int]]:
    """The (request, acquisition event) entries of set sid, in request order (for Python)."""
    if sid < 0:
        return [(int(single_holder(sid)), int(single_since(sid)))]
    off, length = (int(v) for v in pool.sets[sid])
    return [(int(r), int(a)) for r, a in pool.ent[off : off + length]]


@loop_kernel
def set_find(ent, sets, sid, r):  # type: ignore[no-untyped-def]
    """Entry index of request r in the pool set sid (>= 0), or -1."""
    off = sets[sid, 0]
    for i in range(off, off + sets[sid, 1]):
        if ent[i, 0] == r:
            return i
    return -1


@loop_kernel
def set_equal(ent, sets, s1, s2):  # type: ignore[no-untyped-def]
    """Whether sets s1 and s2 hold the same entries."""
    if s1 == s2:
        return True
    if s1 <= 0 or s2 <= 0:  # each set has one id: an empty or single-holder set is its id
        return False
    n = sets[s1, 1]
    if n != sets[s2, 1]:
        return False
    o1 = sets[s1, 0]
    o2 = sets[s2, 0]
    for i in range(n):
        if ent[o1 + i, 0] != ent[o2 + i, 0] or ent[o1 + i, 1] != ent[o2 + i, 1]:
            return False
    return True


@inline_kernel
def set_with(ent, sets, cnt, sid, r, acq):  # type: ignore[no-untyped-def]
    """The set sid with r held since acq (replacing r's entry). The pool must have room."""
    if sid == EMPTY_SET:
        return single(r, acq)
    if sid < 0:
        other = single_holder(sid)
        if other == r:
            return single(r, acq)
        new_off = cnt[0]
        first = new_off if other < r else new_off + 1  # the two entries in request order
        ent[first, 0] = other
        ent[first, 1] = single_since(sid)
        ent[2 * new_off + 1 - first, 0] = r
        ent[2 * new_off + 1 - first, 1] = acq
        return _close_set(sets, cnt, new_off, new_off + 2)
    i = set_find(ent, sets, sid, r)
    if i >= 0 and ent[i, 1] == acq:
        return sid
    off = sets[sid, 0]
    n = sets[sid, 1]
    new_off = cnt[0]
    k = new_off
    placed = False
    for j in range(off, off + n):  # copy the entries, r placed in request order
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


@inline_kernel
def set_without(ent, sets, cnt, sid, r):  # type: ignore[no-untyped-def]
    """The set sid without r. The pool must have room."""
    if sid <= 0:
        return EMPTY_SET if sid < 0 and single_holder(sid) == r else sid
    if set_find(ent, sets, sid, r) < 0:
        return sid
    off = sets[sid, 0]
    if sets[sid, 1] == 2:  # one holder left: its set is kept in the map
        k = off if ent[off, 0] != r else off + 1
        return single(ent[k, 0], ent[k, 1])
    new_off = cnt[0]
    k = new_off
    for j in range(off, off + sets[sid, 1]):
        if ent[j, 0] != r:
            ent[k, 0] = ent[j, 0]
            ent[k, 1] = ent[j, 1]
            k += 1
    return _close_set(sets, cnt, new_off, k)


@loop_kernel
def _close_set(sets, cnt, off, end):  # type: ignore[no-untyped-def]
    """Register entries [off, end) as a new set; returns its id."""
    sid = cnt[1]
    sets[sid, 0] = off
    sets[sid, 1] = end - off
    cnt[0] = end
    cnt[1] = sid + 1
    cnt[2] = max(cnt[2], end - off)
    return sid


@njit(cache=True, nogil=True)
def pool_reserve(h: Holders, need_ent: int, need_sets: int) -> HolderPool:
    """Room for need_ent entries and need_sets sets: compact the pool to the sets the map still
    uses (renumbering them in the map), then grow it if still short. Returns the pool to use."""
    ent, sets, cnt = h.pool.ent, h.pool.sets, h.pool.cnt
    words, val, n = h.runs.words, h.runs.val, h.runs.n
    if cnt[0] + need_ent <= ent.shape[0] and cnt[1] + need_sets <= sets.shape[0]:
        return h.pool
    remap = np.full(cnt[1], -1, dtype=np.int64)  # old set id -> new one, -1: not copied yet
    remap[EMPTY_SET] = EMPTY_SET
    new_ent = np.empty((max(ent.shape[0], 16), 2), dtype=np.int64)
    new_sets = np.empty((max(sets.shape[0], 16), 2), dtype=np.int64)
    new_sets[EMPTY_SET, 0] = 0
    new_sets[EMPTY_SET, 1] = 0
    ne = 0
    ns = EMPTY_SET + 1
    j = 0
    while j < n:
        sid = val[j]
        if sid < 0:  # a single holder, kept in the map
            j = bs_next(words, j + 1, n)
            continue
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
        j = bs_next(words, j + 1, n)
    cnt[0] = ne
    cnt[1] = ns
    want_ent = 2 * (ne + need_ent)
    want_sets = 2 * (ns + need_sets)
    if want_ent > new_ent.shape[0]:
        new_ent = grown(new_ent, ne, want_ent)
    if want_sets > new_sets.shape[0]:
        new_sets = grown(new_sets, ns, want_sets)
    return HolderPool(new_ent, new_sets, cnt)


@loop_kernel
def count_runs(m: RunMap, a: int, b: int) -> int:
    """How many runs of the map meet [a, b)."""
    words, n = m.words, m.n
    k = 1
    j = bs_next(words, a + 1, n)
    while j < b:
        k += 1
        j = bs_next(words, j + 1, n)
    return k


@loop_kernel
def short_of_room(h: Holders, a: int, b: int) -> bool:
    """Whether updating [a, b) might overflow h's pool (a cheap bound: at most one new set per
    cell, each at most one entry longer than the longest set so far)."""
    cnt = h.pool.cnt
    need = b - a + 2
    return (
        cnt[0] + need * (cnt[2] + 1) > h.pool.ent.shape[0] or cnt[1] + need > h.pool.sets.shape[0]
    )


@njit(cache=True, nogil=True)
def with_room(h: Holders, a: int, b: int) -> Holders:
    """h with room in its pool to update [a, b): when the cheap bound fails, the runs of [a, b)
    are counted and the pool is compacted, then grown if still short."""
    if not short_of_room(h, a, b):
        return h
    need = count_runs(h.runs, a, b) + 2
    return Holders(h.runs, pool_reserve(h, need * (h.pool.cnt[2] + 1), need))


@inline_kernel
def update_holders(h: Holders, a: int, b: int, r: int, acq: int) -> None:
    """Add r, held since acq, to the holder sets of [a, b) (acq < 0 removes r), merging runs
    whose sets became equal (from a's left neighbour to the run that starts at b) in the same
    walk. The pool must have room (with_room)."""
    words, hv, n = h.runs.words, h.runs.val, h.runs.n
    ent, sets, cnt = h.pool.ent, h.pool.sets, h.pool.cnt
    rm_split(words, hv, a, n)
    rm_split(words, hv, b, n)
    has_prev = a > 0  # a run to the left of a (set ids may be negative: no sentinel id)
    prev_sid = hv[bs_prev(words, a - 1)] if has_prev else EMPTY_SET  # the walk leaves it be
    x = a
    while x < b:  # a new set for each run of [a, b); a run holding what the one before holds
        nx = bs_next(words, x + 1, n)  # joins it
        if acq >= 0:
            sid = set_with(ent, sets, cnt, hv[x], r, acq)
        else:
            sid = set_without(ent, sets, cnt, hv[x], r)
        hv[x] = sid
        if has_prev and set_equal(ent, sets, prev_sid, sid):
            bs_clear(words, x)
        else:
            prev_sid = sid
            has_prev = True
        x = nx
    if b < n and has_prev and set_equal(ent, sets, prev_sid, hv[b]):  # the run at b, unchanged
        bs_clear(words, b)
