"""What a read saw, cell run by cell run: own data, uninitialised, a prefix-cache hit
(verified or not), or an exposure of kind stale, overwritten or prefix-mismatch.

The walk merges the runs of the coarse maps (last writer request; holder requests), so a read
of its own data costs one run however many writes and allocations made it. Only where another
request wrote last does it descend into the fine maps (the exact write; holders with the event
that acquired each holding) to classify, per docs/DESIGN.md §4:

- r holds the cells through a share that came after the write: a prefix-cache hit, verified
  when both hashes exist and are equal, unverified when one is missing, else prefix-mismatch;
- otherwise overwritten when the write came after r acquired its holding, or the writer still
  holds the cells; stale otherwise (also when r does not hold them at all).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from forensics.analysis.buffers import push_category, push_exposure
from forensics.analysis.codes import (
    FOREIGN,
    OVERWRITTEN,
    OWN,
    PREFIX_MISMATCH,
    READ_UNHELD,
    SHARE,
    SHARED_UNVERIFIED,
    SHARED_VERIFIED,
    STALE,
    UNINITIALISED,
)
from forensics.analysis.holders import set_find
from forensics.analysis.runmap import bs_next, bs_prev
from forensics.analysis.violations import push_holders


@njit(cache=True, nogil=True)
def classify(r, w, wr, sid, op, hsh, ent, sets):
    """(category, exposure kind or -1) of r reading cells last written by event w of wr."""
    hi = set_find(ent, sets, sid, r)
    acq = ent[hi, 1] if hi >= 0 else -1
    if hi >= 0 and op[acq] == SHARE and acq > w:
        if hsh[acq] < 0 or hsh[w] < 0:
            return SHARED_UNVERIFIED, -1
        if hsh[acq] == hsh[w]:
            return SHARED_VERIFIED, -1
        return FOREIGN, PREFIX_MISMATCH
    if (hi >= 0 and w > acq) or set_find(ent, sets, sid, wr) >= 0:
        return FOREIGN, OVERWRITTEN
    return FOREIGN, STALE


@njit(cache=True, nogil=True)
def foreign_run(t, r, wr, x, e, n, lw, hf, ent, sets, op, hsh, ex, nex, cat, ncat):
    """Classify [x, e), last written by another request wr, along the fine maps."""
    lw_w, lw_o, lw_n, lw_v = lw
    hw, ho, hn, hv = hf
    p_w = bs_prev(lw_w, lw_o, lw_n, x)
    n_w = bs_next(lw_w, lw_o, lw_n, x + 1, n)
    p_h = bs_prev(hw, ho, hn, x)
    n_h = bs_next(hw, ho, hn, x + 1, n)
    y = x
    while y < e:
        z = min(n_w, n_h, e)
        w = lw_v[p_w]
        category, kind = classify(r, w, wr, hv[p_h], op, hsh, ent, sets)
        cat, ncat = push_category(cat, ncat, t, category, y, z)
        if kind >= 0:
            ex, nex = push_exposure(ex, nex, t, y, z, w, kind)
        y = z
        if y == n_w:
            p_w = n_w
            n_w = bs_next(lw_w, lw_o, lw_n, n_w + 1, n)
        if y == n_h:
            p_h = n_h
            n_h = bs_next(hw, ho, hn, n_h + 1, n)
    return ex, nex, cat, ncat


@njit(cache=True, nogil=True)
def read(t, r, a, b, n, lw, ww, hc, hf, pc, pf, op, hsh, ex, nex, cat, ncat, vio, nv):
    """Everything the read by r of [a, b) at event t saw; returns the grown buffers."""
    ww_w, ww_o, ww_n, ww_v = ww
    cw, co, cn, cv = hc
    ent_c, sets_c = pc
    ent_f, sets_f = pf
    p_l = bs_prev(ww_w, ww_o, ww_n, a)
    n_l = bs_next(ww_w, ww_o, ww_n, a + 1, n)
    p_h = bs_prev(cw, co, cn, a)
    n_h = bs_next(cw, co, cn, a + 1, n)
    x = a
    while x < b:
        e = min(n_l, n_h, b)
        wr = ww_v[p_l]
        if wr < 0:
            cat, ncat = push_category(cat, ncat, t, np.int64(UNINITIALISED), x, e)
        elif wr == r:
            cat, ncat = push_category(cat, ncat, t, np.int64(OWN), x, e)
        else:
            ex, nex, cat, ncat = foreign_run(
                t, r, wr, x, e, n, lw, hf, ent_f, sets_f, op, hsh, ex, nex, cat, ncat
            )
        if set_find(ent_c, sets_c, cv[p_h], r) < 0:
            vio, nv = push_holders(
                vio, nv, t, x, e, np.int64(READ_UNHELD), ent_c, sets_c, cv[p_h], r
            )
        x = e
        if x == n_l:
            p_l = n_l
            n_l = bs_next(ww_w, ww_o, ww_n, n_l + 1, n)
        if x == n_h:
            p_h = n_h
            n_h = bs_next(cw, co, cn, n_h + 1, n)
    return ex, nex, cat, ncat, vio, nv
