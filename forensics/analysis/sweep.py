"""The compiled per-node sweep: whose data every read saw, and every ownership violation.

Input: one node's events already in their total order (see forensics.analysis.order), as plain
int64 arrays, with slot ranges compressed to cells (`[c0, c1)`; every event boundary is a cell
boundary, so the state is constant inside a cell). The sweep keeps three run maps over cells:

- `lw`  cell run -> index of the last write event (-1: never written);
- `lww` cell run -> request code of the last writer (coalesced, so own data is one run);
- `hf`  cell run -> holder set id (see forensics.analysis.holders).

Each read walks the runs of `lww` and `hf` inside its range; only where the writer is another
request does it look at `lw`, run by run, and emits a foreign piece. Cost therefore grows with
events, runs touched and foreign pieces, never with the number of slots in a range.

Outputs (int64, 2-D, one row per piece, cells not yet mapped back to slots):
- exposures  `[read event, c0, c1, write event, kind]`  (kind: EXPOSURE_KINDS)
- categories `[read event, category, c0, c1]`          (category: CATEGORIES)
- violations `[event, c0, c1, violation, other request code or -1]` (violation: VIOLATIONS)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from forensics.analysis.holders import (
    new_pool,
    pool_reserve,
    set_equal,
    set_find,
    set_with,
    set_without,
)
from forensics.analysis.runmap import bs_clear, bs_next, bs_prev, new_map, rm_assign, rm_split

OPS = ("free", "alloc", "share", "write", "read")  # code = index = op rank
FREE, ALLOC, SHARE, WRITE, READ = 0, 1, 2, 3, 4
EXPOSURE_KINDS = ("stale", "overwritten", "prefix-mismatch")
CATEGORIES = ("own", "shared_verified", "shared_unverified", "foreign", "uninitialised")
VIOLATIONS = ("write-after-free", "write-unheld", "double-allocation", "read-unheld")


@njit(cache=True, nogil=True)
def _push(buf, n, a, b, c, d, e):
    if n >= buf.shape[0]:
        grown = np.empty((2 * buf.shape[0] + 16, buf.shape[1]), dtype=np.int64)
        grown[:n] = buf[:n]
        buf = grown
    buf[n, 0] = a
    buf[n, 1] = b
    buf[n, 2] = c
    buf[n, 3] = d
    if buf.shape[1] > 4:
        buf[n, 4] = e
    return buf


@njit(cache=True, nogil=True)
def _push_cat(cat, n, t, kind, x, e):
    """Append a category piece, extending the previous one when it continues it."""
    if n > 0 and cat[n - 1, 0] == t and cat[n - 1, 1] == kind and cat[n - 1, 3] == x:
        cat[n - 1, 3] = e
        return cat, n
    return _push(cat, n, t, kind, x, e, 0), n + 1


@njit(cache=True, nogil=True)
def _push_holders(vio, n, t, x, e, kind, ent, sets, sid, skip):
    """One violation row per holder in sid other than skip, or one with -1 when none."""
    any_other = False
    off = sets[sid, 0]
    for i in range(off, off + sets[sid, 1]):
        if ent[i, 0] != skip:
            vio = _push(vio, n, t, x, e, kind, ent[i, 0])
            n += 1
            any_other = True
    if not any_other and kind != 2:
        vio = _push(vio, n, t, x, e, kind, -1)
        n += 1
    return vio, n


@njit(cache=True, nogil=True)
def _count_runs(words, offs, nlev, a, b, n):
    k = 1
    j = bs_next(words, offs, nlev, a + 1, n)
    while j < b:
        k += 1
        j = bs_next(words, offs, nlev, j + 1, n)
    return k


@njit(cache=True, nogil=True)
def _update_holders(hw, ho, hn, hv, ent, sets, cnt, a, b, r, acq, n):
    """Add r (held since acq; acq < 0 removes r) to the holder sets of [a, b), then coalesce."""
    runs = _count_runs(hw, ho, hn, a, b, n) + 2
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


@njit(cache=True, nogil=True)
def _classify(t, r, w, wr, hi, sid, op, hsh, ent, sets):
    """Category (and exposure kind, or -1) of a read by r at t of cells last written by w."""
    if hi >= 0 and op[ent[hi, 1]] == SHARE and ent[hi, 1] > w:
        hs = hsh[ent[hi, 1]]
        hw_ = hsh[w]
        if hs < 0 or hw_ < 0:
            return 2, -1
        if hs == hw_:
            return 1, -1
        return 3, 2
    if (hi >= 0 and w > ent[hi, 1]) or set_find(ent, sets, sid, wr) >= 0:
        return 3, 1
    return 3, 0


@njit(cache=True, nogil=True)
def _unheld_write(vio, nv, t, x, e, r, acq_ptr, acq_idx, c0, c1, ent, sets, sid):
    """Violation rows for a write by r of [x, e), which r does not hold: after free where an
    earlier holding of r covered the cells, unheld elsewhere."""
    lo = np.empty(acq_ptr[r + 1] - acq_ptr[r], dtype=np.int64)
    hi = np.empty_like(lo)
    k = 0
    for i in range(acq_ptr[r], acq_ptr[r + 1]):
        j = acq_idx[i]
        if j >= t:
            break
        s0 = max(x, c0[j])
        s1 = min(e, c1[j])
        if s0 < s1:
            lo[k] = s0
            hi[k] = s1
            k += 1
    order = np.argsort(lo[:k])
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
            vio, nv = _push_holders(vio, nv, t, cur, s0, 1, ent, sets, sid, r)
        vio, nv = _push_holders(vio, nv, t, s0, s1, 0, ent, sets, sid, r)
        cur = s1
    if cur < e:
        vio, nv = _push_holders(vio, nv, t, cur, e, 1, ent, sets, sid, r)
    return vio, nv


@njit(cache=True, nogil=True)
def _read(t, r, a, b, n, lw, ww, hf, ent, sets, op, hsh, ex, nex, cat, ncat, vio, nv):
    lw_w, lw_o, lw_n, lw_v = lw
    ww_w, ww_o, ww_n, ww_v = ww
    hw, ho, hn, hv = hf
    x = a
    p_l = bs_prev(ww_w, ww_o, ww_n, a)
    n_l = bs_next(ww_w, ww_o, ww_n, a + 1, n)
    p_h = bs_prev(hw, ho, hn, a)
    n_h = bs_next(hw, ho, hn, a + 1, n)
    while x < b:
        e = min(n_l, n_h, b)
        wr = ww_v[p_l]
        sid = hv[p_h]
        hi = set_find(ent, sets, sid, r)
        if wr < 0:
            cat, ncat = _push_cat(cat, ncat, t, 4, x, e)
        elif wr == r:
            cat, ncat = _push_cat(cat, ncat, t, 0, x, e)
        else:
            y = x
            pw = bs_prev(lw_w, lw_o, lw_n, x)
            while y < e:
                z = min(bs_next(lw_w, lw_o, lw_n, y + 1, n), e)
                w = lw_v[pw]
                category, kind = _classify(t, r, w, wr, hi, sid, op, hsh, ent, sets)
                cat, ncat = _push_cat(cat, ncat, t, category, y, z)
                if kind >= 0:
                    ex = _push(ex, nex, t, y, z, w, kind)
                    nex += 1
                y = z
                pw = z
        if hi < 0:
            vio, nv = _push_holders(vio, nv, t, x, e, 3, ent, sets, sid, r)
        x = e
        if x == n_l:
            p_l = n_l
            n_l = bs_next(ww_w, ww_o, ww_n, n_l + 1, n)
        if x == n_h:
            p_h = n_h
            n_h = bs_next(hw, ho, hn, n_h + 1, n)
    return ex, nex, cat, ncat, vio, nv


@njit(cache=True, nogil=True)
def _check_holders(t, r, a, b, n, hf, ent, sets, vio, nv, is_write, acq_ptr, acq_idx, c0, c1):
    """Violations of a write (cells r does not hold) or an alloc (cells others hold)."""
    hw, ho, hn, hv = hf
    x = a
    p_h = bs_prev(hw, ho, hn, a)
    while x < b:
        e = min(bs_next(hw, ho, hn, x + 1, n), b)
        sid = hv[p_h]
        if is_write:
            if set_find(ent, sets, sid, r) < 0:
                vio, nv = _unheld_write(vio, nv, t, x, e, r, acq_ptr, acq_idx, c0, c1, ent, sets, sid)
        else:
            vio, nv = _push_holders(vio, nv, t, x, e, 2, ent, sets, sid, r)
        x = e
        p_h = e
    return vio, nv


@njit(cache=True, nogil=True)
def sweep_cells(req, op, c0, c1, hsh, acq_ptr, acq_idx, n, lw, ww, hf, ent, sets, cnt):
    """Run one node's ordered events through the maps; see the module docstring."""
    ex = np.empty((1024, 5), dtype=np.int64)
    cat = np.empty((1024, 4), dtype=np.int64)
    vio = np.empty((256, 5), dtype=np.int64)
    nex = 0
    ncat = 0
    nv = 0
    hw, ho, hn, hv = hf
    for t in range(req.shape[0]):
        r = req[t]
        o = op[t]
        a = c0[t]
        b = c1[t]
        if o == READ:
            ex, nex, cat, ncat, vio, nv = _read(
                t, r, a, b, n, lw, ww, hf, ent, sets, op, hsh, ex, nex, cat, ncat, vio, nv
            )
        elif o == WRITE:
            vio, nv = _check_holders(t, r, a, b, n, hf, ent, sets, vio, nv, True, acq_ptr,
                                     acq_idx, c0, c1)
            rm_assign(lw[0], lw[1], lw[2], lw[3], a, b, t, n)
            rm_assign(ww[0], ww[1], ww[2], ww[3], a, b, r, n)
        elif o == ALLOC or o == SHARE:
            if o == ALLOC:
                vio, nv = _check_holders(t, r, a, b, n, hf, ent, sets, vio, nv, False, acq_ptr,
                                         acq_idx, c0, c1)
            ent, sets = _update_holders(hw, ho, hn, hv, ent, sets, cnt, a, b, r, t, n)
        elif o == FREE:
            ent, sets = _update_holders(hw, ho, hn, hv, ent, sets, cnt, a, b, r, -1, n)
    return ex[:nex], cat[:ncat], vio[:nv]


def compress(slot_start: np.ndarray, slot_count: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                      np.ndarray]:
    """Cell boundaries (sorted real slots) and each event's [c0, c1) in cells."""
    end = slot_start + slot_count
    bounds = np.unique(np.concatenate([slot_start, end]))
    return bounds, np.searchsorted(bounds, slot_start), np.searchsorted(bounds, end)


def acquisitions(req: np.ndarray, op: np.ndarray, n_req: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR lists of each request's alloc/share event indices, in event order."""
    idx = np.flatnonzero((op == ALLOC) | (op == SHARE))
    idx = idx[np.argsort(req[idx], kind="stable")]
    ptr = np.zeros(n_req + 1, dtype=np.int64)
    np.add.at(ptr, req[idx] + 1, 1)
    return np.cumsum(ptr), idx.astype(np.int64)


def sweep_node(
    req: np.ndarray,
    op: np.ndarray,
    slot_start: np.ndarray,
    slot_count: np.ndarray,
    content_hash: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sweep one node's events, given in their total order as int64 arrays.

    req: request codes >= 0; op: codes of OPS; content_hash: codes >= 0, -1 when absent.
    Returns (exposures, categories, violations) as described in the module docstring, with
    cells mapped back to real slots."""
    req = np.ascontiguousarray(req, dtype=np.int64)
    op = np.ascontiguousarray(op, dtype=np.int64)
    hsh = np.ascontiguousarray(content_hash, dtype=np.int64)
    if req.shape[0] == 0:
        return np.empty((0, 5), np.int64), np.empty((0, 4), np.int64), np.empty((0, 5), np.int64)
    bounds, c0, c1 = compress(np.asarray(slot_start, np.int64), np.asarray(slot_count, np.int64))
    n = max(1, len(bounds) - 1)
    acq_ptr, acq_idx = acquisitions(req, op, int(req.max()) + 1)
    ent, sets, cnt = new_pool(4 * len(req) + 16)
    ex, cat, vio = sweep_cells(req, op, c0.astype(np.int64), c1.astype(np.int64), hsh, acq_ptr,
                               acq_idx, n, new_map(n, -1), new_map(n, -1), new_map(n, 0), ent,
                               sets, cnt)
    for buf, cols in ((ex, (1, 2)), (cat, (2, 3)), (vio, (1, 2))):
        for col in cols:
            buf[:, col] = bounds[buf[:, col]]
    return ex, cat, vio
