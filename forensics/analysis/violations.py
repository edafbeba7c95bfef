"""Ownership violations found by the compiled sweep (see the semantics in docs/DESIGN.md §4):
write-after-free, write-unheld, double-allocation, read-unheld. Rows are
`[event, c0, c1, violation, other request code or -1]`, one per other holder."""

from __future__ import annotations

import numpy as np
from numba import njit

from forensics.analysis.buffers import push
from forensics.analysis.codes import DOUBLE_ALLOCATION, WRITE_AFTER_FREE, WRITE_UNHELD
from forensics.analysis.holders import set_find
from forensics.analysis.runmap import bs_next, bs_prev


@njit(cache=True, nogil=True)
def push_holders(vio, n, t, x, e, kind, ent, sets, sid, skip):
    """One row per holder in sid other than skip; one row with -1 when there is none (except
    for double-allocation, which needs another holder)."""
    any_other = False
    off = sets[sid, 0]
    for i in range(off, off + sets[sid, 1]):
        if ent[i, 0] != skip:
            vio = push(vio, n, t, x, e, kind, ent[i, 0])
            n += 1
            any_other = True
    if not any_other and kind != DOUBLE_ALLOCATION:
        vio = push(vio, n, t, x, e, kind, np.int64(-1))
        n += 1
    return vio, n


@njit(cache=True, nogil=True)
def unheld_write(vio, nv, t, x, e, r, acq_ptr, acq_idx, c0, c1, ent, sets, sid):
    """Rows for a write by r of [x, e), which r does not hold: write-after-free where an earlier
    alloc/share of r covered the cells, write-unheld elsewhere."""
    lo = np.empty(acq_ptr[r + 1] - acq_ptr[r], dtype=np.int64)
    hi = np.empty_like(lo)
    k = 0
    for i in range(acq_ptr[r], acq_ptr[r + 1]):
        j = acq_idx[i]
        if j >= t:
            break
        if max(x, c0[j]) < min(e, c1[j]):
            lo[k] = max(x, c0[j])
            hi[k] = min(e, c1[j])
            k += 1
    order = np.arange(k)
    for i in range(1, k):  # insertion sort by start: an unheld write meets few holdings
        j = i
        while j > 0 and lo[order[j - 1]] > lo[order[j]]:
            order[j - 1], order[j] = order[j], order[j - 1]
            j -= 1
    cur = x
    i = 0
    while i < k:
        s0 = lo[order[i]]
        s1 = hi[order[i]]
        i += 1
        while i < k and lo[order[i]] <= s1:
            s1 = max(s1, hi[order[i]])
            i += 1
        if cur < s0:
            vio, nv = push_holders(vio, nv, t, cur, s0, np.int64(WRITE_UNHELD), ent, sets, sid, r)
        vio, nv = push_holders(vio, nv, t, s0, s1, np.int64(WRITE_AFTER_FREE), ent, sets, sid, r)
        cur = s1
    if cur < e:
        vio, nv = push_holders(vio, nv, t, cur, e, np.int64(WRITE_UNHELD), ent, sets, sid, r)
    return vio, nv


@njit(cache=True, nogil=True)
def check_holders(t, r, a, b, n, hmap, ent, sets, vio, nv, is_write, acq_ptr, acq_idx, c0, c1):
    """Violations of a write (cells r does not hold) or of an alloc (cells others hold)."""
    hw, ho, hn, hv = hmap
    x = a
    p_h = bs_prev(hw, ho, hn, a)
    while x < b:
        e = min(bs_next(hw, ho, hn, x + 1, n), b)
        sid = hv[p_h]
        if not is_write:
            vio, nv = push_holders(vio, nv, t, x, e, np.int64(DOUBLE_ALLOCATION), ent, sets, sid, r)
        elif set_find(ent, sets, sid, r) < 0:
            vio, nv = unheld_write(vio, nv, t, x, e, r, acq_ptr, acq_idx, c0, c1, ent, sets, sid)
        x = e
        p_h = e
    return vio, nv
