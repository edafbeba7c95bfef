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

from typing import TYPE_CHECKING

from numba import njit

from forensics.analysis.buffers import Pieces, push_category, push_exposure
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
from forensics.analysis.holders import HolderPool, set_find
from forensics.analysis.runmap import bs_next, bs_prev
from forensics.analysis.violations import push_holders

if TYPE_CHECKING:
    from forensics.analysis.sweep import Events, SweepMaps

NO_KIND = -1  # classify's exposure kind for what is no exposure
NOBODY = -1  # ww's value where no write happened yet (and lw's: no write event)


@njit(cache=True, nogil=True)
def classify(ev: Events, t: int, w: int, wr: int, pool: HolderPool, sid: int) -> tuple[int, int]:
    """(category, exposure kind or NO_KIND) of the read at event t, of cells last written by
    event w of request wr, held by set sid."""
    hi = set_find(pool, sid, ev.req[t])
    acq = pool.ent[hi, 1] if hi >= 0 else -1  # the event whose holding covers the cells
    if hi >= 0 and ev.op[acq] == SHARE and acq > w:
        hsh = ev.hsh
        if hsh[acq] < 0 or hsh[w] < 0:  # -1: the ledger gave no content hash
            return SHARED_UNVERIFIED, NO_KIND
        if hsh[acq] == hsh[w]:
            return SHARED_VERIFIED, NO_KIND
        return FOREIGN, PREFIX_MISMATCH
    if (hi >= 0 and w > acq) or set_find(pool, sid, wr) >= 0:
        return FOREIGN, OVERWRITTEN
    return FOREIGN, STALE


@njit(cache=True, nogil=True)
def foreign_run(
    ev: Events, t: int, wr: int, x: int, e: int, maps: SweepMaps, out: Pieces
) -> Pieces:
    """Classify [x, e) of the read at event t, last written by another request wr, along the
    fine maps (maps.lw: the exact write; maps.hf: holders with their acquisition)."""
    lw, hf = maps.lw, maps.hf.runs  # locals: attribute reads in the loop count references
    pool = maps.hf.pool
    lw_val, hf_val = lw.val, hf.val
    p_w = bs_prev(lw, x)  # the runs of lw and hf holding y, and where the next ones start
    n_w = bs_next(lw, x + 1)
    p_h = bs_prev(hf, x)
    n_h = bs_next(hf, x + 1)
    y = x
    while y < e:
        z = min(n_w, n_h, e)
        w = lw_val[p_w]
        category, kind = classify(ev, t, w, wr, pool, hf_val[p_h])
        out = push_category(out, t, category, y, z)
        if kind != NO_KIND:
            out = push_exposure(out, t, y, z, w, kind)
        y = z
        if y == n_w:
            p_w = n_w
            n_w = bs_next(lw, n_w + 1)
        if y == n_h:
            p_h = n_h
            n_h = bs_next(hf, n_h + 1)
    return out


@njit(cache=True, nogil=True)
def read(ev: Events, t: int, maps: SweepMaps, out: Pieces) -> Pieces:
    """Everything the read at event t saw; returns the output with its rows added."""
    r = ev.req[t]
    b = ev.c1[t]
    ww, hc = maps.ww, maps.hc.runs  # locals: attribute reads in the loop count references
    pool_c = maps.hc.pool
    ww_val, hc_val = ww.val, hc.val
    x = ev.c0[t]
    p_l = bs_prev(ww, x)  # the runs of ww and hc holding x, and where the next ones start
    n_l = bs_next(ww, x + 1)
    p_h = bs_prev(hc, x)
    n_h = bs_next(hc, x + 1)
    while x < b:
        e = min(n_l, n_h, b)
        wr = ww_val[p_l]
        if wr < 0:  # NOBODY
            out = push_category(out, t, UNINITIALISED, x, e)
        elif wr == r:
            out = push_category(out, t, OWN, x, e)
        else:
            out = foreign_run(ev, t, wr, x, e, maps, out)
        if set_find(pool_c, hc_val[p_h], r) < 0:
            out = push_holders(out, t, x, e, READ_UNHELD, pool_c, hc_val[p_h], r)
        x = e
        if x == n_l:
            p_l = n_l
            n_l = bs_next(ww, n_l + 1)
        if x == n_h:
            p_h = n_h
            n_h = bs_next(hc, n_h + 1)
    return out
