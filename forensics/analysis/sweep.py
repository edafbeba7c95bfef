"""The compiled per-node sweep: whose data every read saw, and every ownership violation.

Input: one node's events already in their total order (see forensics.analysis.order), as plain
int64 arrays, with slot ranges compressed to cells (`[c0, c1)`; every event boundary is a cell
boundary, so the state is constant inside a cell). The sweep keeps four run maps over cells:

- `lw` cell run -> index of the last write event (-1: never written);
- `ww` cell run -> request code of the last writer (coalesced, so own data is one run);
- `hc` cell run -> set of holder requests (coalesced across a request's allocations);
- `hf` cell run -> set of (holder, event that acquired the holding)
  (holder sets: forensics.analysis.holders, one pool for hc and one for hf).

Each read walks the runs of `ww` and `hc` inside its range; only where the writer is another
request does it walk `lw` and `hf` there and emit foreign pieces (forensics.analysis.kinds).
Cost therefore grows with events, runs touched and foreign pieces, never with the number of
slots in a range.

Outputs of sweep_cells (2-D, one row per piece, cells not yet mapped back to slots; int64
except categories, int32 since there is at least one row per read):
- exposures  `[read event, c0, c1, write event, kind]`  (kind: EXPOSURE_KINDS)
- categories `[read event, category, c0, c1]`          (category: CATEGORIES)
- violations `[event, c0, c1, violation, other request code or -1]` (violation: VIOLATIONS)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from forensics.analysis.codes import (  # noqa: F401  (re-exported names)
    ALLOC,
    CATEGORIES,
    EXPOSURE_KINDS,
    FREE,
    OPS,
    READ,
    SHARE,
    VIOLATIONS,
    WRITE,
)
from forensics.analysis.holders import new_pool, update_holders
from forensics.analysis.kinds import read
from forensics.analysis.runmap import new_map, rm_assign
from forensics.analysis.violations import check_holders


@njit(cache=True, nogil=True)
def sweep_cells(
    req, op, c0, c1, hsh, acq_ptr, acq_idx, n, lw, ww, hc, hf, pool_c, pool_f, cat_rows
):
    """Run one node's ordered events through the maps; see the module docstring. cat_rows: the
    room to start with for category rows (each read makes at least one)."""
    ex = np.empty((1024, 5), dtype=np.int64)
    cat = np.empty((cat_rows, 4), dtype=np.int32)
    vio = np.empty((256, 5), dtype=np.int64)
    nex = np.int64(0)
    ncat = np.int64(0)
    nv = np.int64(0)
    ent_c, sets_c, cnt_c = pool_c
    ent_f, sets_f, cnt_f = pool_f
    for t in range(req.shape[0]):
        r = req[t]
        o = op[t]
        a = c0[t]
        b = c1[t]
        if o == READ:
            ex, nex, cat, ncat, vio, nv = read(
                t,
                r,
                a,
                b,
                n,
                lw,
                ww,
                hc,
                hf,
                (ent_c, sets_c),
                (ent_f, sets_f),
                op,
                hsh,
                ex,
                nex,
                cat,
                ncat,
                vio,
                nv,
            )
        elif o == WRITE:
            vio, nv = check_holders(
                t, r, a, b, n, hc, ent_c, sets_c, vio, nv, o == WRITE, acq_ptr, acq_idx, c0, c1
            )
            rm_assign(lw[0], lw[1], lw[2], lw[3], a, b, t, n)
            rm_assign(ww[0], ww[1], ww[2], ww[3], a, b, r, n)
        else:
            if o == ALLOC:
                vio, nv = check_holders(
                    t, r, a, b, n, hc, ent_c, sets_c, vio, nv, o == WRITE, acq_ptr, acq_idx, c0, c1
                )
            since = t if o != FREE else -1
            ent_c, sets_c = update_holders(hc, ent_c, sets_c, cnt_c, a, b, r, min(since, 0), n)
            ent_f, sets_f = update_holders(hf, ent_f, sets_f, cnt_f, a, b, r, since, n)
    return ex[:nex], cat[:ncat], vio[:nv]


@dataclass(frozen=True)
class Cells:
    """A node's slot ranges as cells: `bounds` holds the sorted distinct range ends (real
    slots), event i covers cells [c0[i], c1[i]), cell k is slots [bounds[k], bounds[k + 1])."""

    bounds: np.ndarray  # int64
    c0: np.ndarray  # int32
    c1: np.ndarray  # int32


def compress(slot_start: np.ndarray, slot_count: np.ndarray) -> Cells:
    """The cells of a node's ranges [slot_start, slot_start + slot_count)."""
    slot_start = np.asarray(slot_start, np.int64)
    return cells_of(slot_start, slot_start + np.asarray(slot_count, np.int64))


def cells_of(start: np.ndarray, end: np.ndarray) -> Cells:
    """The cells of ranges [start, end) (int64 arrays), holding at most one extra int64 copy of
    one of them at a time (a node can have tens of millions of events)."""
    bounds = np.union1d(_distinct(start), _distinct(end))
    if len(bounds) >= np.iinfo(np.int32).max:
        raise ValueError(f"{len(bounds)} cells do not fit int32")
    return Cells(bounds, _positions(bounds, start), _positions(bounds, end))


def _distinct(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a (np.unique without its hashing and extra copies)."""
    s = np.sort(a)
    keep = np.empty(len(s), dtype=bool)
    keep[:1] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _positions(bounds: np.ndarray, values: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """int32 positions of values in bounds, searched in chunks to keep int64 temporaries small."""
    out = np.empty(len(values), dtype=np.int32)
    for i in range(0, len(values), chunk):
        out[i : i + chunk] = np.searchsorted(bounds, values[i : i + chunk])
    return out


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
    """Sweep one node's events, given in their total order as integer arrays.

    req: request codes >= 0; op: codes of OPS; content_hash: codes >= 0, -1 when absent.
    Returns (exposures, categories, violations) as described in the module docstring, with
    cells mapped back to real slots."""
    cells = compress(slot_start, slot_count)
    ex, cat, vio = sweep_cells_of(req, op, cells, content_hash)
    bounds = cells.bounds
    slots = np.column_stack([cat[:, 0], cat[:, 1], bounds[cat[:, 2]], bounds[cat[:, 3]]])
    return ex, slots.astype(np.int64), vio


def sweep_cells_of(
    req: np.ndarray, op: np.ndarray, cells: Cells, content_hash: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sweep_node on ranges already compressed to cells, except that the categories stay in
    cells, as int32 `[read event, category, c0, c1]` (the bulk of the output: at least one row
    per read). The compiled code sees int32 codes and cells and int8 ops: one compiled
    version, and a third of the memory of int64."""
    if req.shape[0] == 0:
        return np.empty((0, 5), np.int64), np.empty((0, 4), np.int64), np.empty((0, 5), np.int64)
    req = _narrow(req, np.int32)
    op = _narrow(op, np.int8)
    hsh = _narrow(content_hash, np.int32)
    n = max(1, len(cells.bounds) - 1)
    acq_ptr, acq_idx = acquisitions(req, op, int(req.max()) + 1)
    pool = min(2 * len(req), POOL_START)
    ex, cat, vio = sweep_cells(
        req,
        op,
        cells.c0,
        cells.c1,
        hsh,
        acq_ptr,
        acq_idx,
        n,
        new_map(n, -1),
        new_map(n, -1),
        new_map(n, 0),
        new_map(n, 0),
        new_pool(pool),
        new_pool(pool),
        int(np.count_nonzero(op == READ)) + 1024,
    )
    for buf, cols in ((ex, (1, 2)), (vio, (1, 2))):
        for col in cols:
            buf[:, col] = cells.bounds[buf[:, col]]
    return ex, cat, vio


POOL_START = 1 << 20  # holder-set pool entries to start with; the pool grows when it must


def _narrow(a: np.ndarray, dtype: type[np.integer]) -> np.ndarray:
    """a as a contiguous array of dtype, refusing values that do not fit."""
    a = np.asarray(a)
    if a.dtype != dtype and a.size:
        info = np.iinfo(dtype)
        if a.min() < info.min or a.max() > info.max:
            raise ValueError(f"values outside {np.dtype(dtype).name}: {a.min()}..{a.max()}")
    return np.ascontiguousarray(a, dtype=dtype)
