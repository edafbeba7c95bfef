"""The compiled per-node sweep: whose data every read saw, and every ownership violation.

Input: one node's events already in their total order (see forensics.analysis.order), as integer
arrays, with slot ranges compressed to cells (`[c0, c1)`; every event boundary is a cell
boundary, so the state is constant inside a cell). The sweep keeps four run maps over cells:

- `last_write`  cell run -> index of the last write event (-1: never written);
- `last_writer` cell run -> request code of the last writer (coalesced, so own data is one run);
- `holders`     cell run -> set of holder requests (coalesced across a request's allocations);
- `holdings`    cell run -> set of (holder, event that acquired the holding)
  (holder sets: forensics.analysis.holders, one pool for holders and one for holdings).

Each read walks the runs of `last_writer` and `holders` inside its range; only where the writer
is another request does it walk `last_write` and `holdings` there and emit foreign pieces
(forensics.analysis.kinds).
Cost therefore grows with events, runs touched and foreign pieces, never with the number of
slots in a range.

The compiled kernels take a few named structures (named tuples, which compiled code takes like
plain arguments; forensics.analysis.kerneltypes): Events (the input columns), SweepMaps (the
four maps) and Pieces (the output
buffers, forensics.analysis.buffers).

Outputs of sweep_cells, in Pieces (2-D, one row per piece, cells not yet mapped back to slots;
int64 except categories, int32 since there is at least one row per read):
- exposures  `[read event, c0, c1, write event, kind]`  (kind: EXPOSURE_KINDS)
- categories `[read event, category, c0, c1]`          (category: CATEGORIES)
- violations `[event, c0, c1, violation, other request code or -1]` (violation: VIOLATIONS)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from forensics.analysis.buffers import CAT, EX, VIO, Pieces, fits, new_pieces, regrown
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
from forensics.analysis.compiled import inline_kernel, loop_kernel
from forensics.analysis.holders import (
    MAX_EVENTS,
    Holders,
    new_pool,
    short_of_room,
    update_holders,
    with_room,
)
from forensics.analysis.kerneltypes import Events, SweepMaps
from forensics.analysis.kinds import read
from forensics.analysis.runmap import new_map, rm_assign
from forensics.analysis.violations import check_holders
from forensics.casedb.interrupts import stop_if_interrupted

STRETCH = 1 << 18  # events swept between two looks for a Ctrl-C (a tenth of a second or less)
DONE, MORE_ROWS, MORE_HOLDERS = 0, 1, 2  # why sweep_until stopped
POOL_START = 1 << 20  # holder-set pool entries to start with; the pool grows when it must


def sweep_cells(ev: Events, maps: SweepMaps, out: Pieces) -> Pieces:
    """Run one node's ordered events through the maps; see the module docstring. Returns the
    output buffers (new ones where they had to grow).

    The events run in sweep_until, STRETCH events at a time, which stops early at an event that
    needs more room; the room is made here, and the sweep goes on from that event. Between
    stretches a Ctrl-C stops the sweep (forensics.casedb.interrupts.stop_if_interrupted): compiled
    code cannot be interrupted, and a large node's sweep runs for minutes."""
    t = 0
    room_at = -1
    n = ev.req.shape[0]
    while t < n:
        stop_if_interrupted()
        t, need, ex_rows, cat_rows, vio_rows = sweep_until(
            ev, t, min(n, t + STRETCH), room_at, maps, out
        )
        if need == MORE_ROWS:  # drop event t's rows, grow the buffers; t runs again
            out = regrown(out, ex_rows, cat_rows, vio_rows)
        elif need == MORE_HOLDERS:  # room in both pools for event t's update
            a, b = ev.c0[t], ev.c1[t]
            maps = SweepMaps(
                maps.last_write,
                maps.last_writer,
                with_room(maps.holders, a, b),
                with_room(maps.holdings, a, b),
            )
            room_at = t
    return out


@loop_kernel
def sweep_until(
    ev: Events, t0: int, t_end: int, room_at: int, maps: SweepMaps, out: Pieces
) -> tuple[int, int, int, int, int]:
    """Run events t0, t0 + 1, ... (before t_end) through the maps until one needs room that is
    not there: returns (that event, MORE_ROWS or MORE_HOLDERS, and for MORE_ROWS the rows each
    buffer had before it), or (t_end, DONE, ...) once t_end is reached. The pools have room for
    event room_at (the caller made it).

    Compiled without reference counting (_nrt=False), as is everything it calls: they only
    read and write arrays their caller owns and never make one, and counting references to
    the arrays they pass each other cost as much as the sweep's own work."""
    req, op, c0, c1 = ev.req, ev.op, ev.c0, ev.c1
    last_write, last_writer = maps.last_write, maps.last_writer
    holders, holdings = maps.holders, maps.holdings
    rows = out.rows
    for t in range(t0, t_end):
        o = op[t]
        r = req[t]
        a = c0[t]
        b = c1[t]
        if (o == ALLOC or o == SHARE or o == FREE) and t != room_at:
            if short_of_room(holders, a, b) or short_of_room(
                holdings, a, b
            ):  # rare: a pool is full
                return t, MORE_HOLDERS, 0, 0, 0
        if o != FREE and o != SHARE:  # the events that may add rows: look at what they see
            ex_rows, cat_rows, vio_rows = rows[EX], rows[CAT], rows[VIO]
            looks(ev, t, maps, out)
            if not fits(out):  # rare: a buffer ran out of room
                return t, MORE_ROWS, ex_rows, cat_rows, vio_rows
            if o == READ:
                continue
        if o == WRITE:
            rm_assign(last_write, a, b, t)
            rm_assign(last_writer, a, b, r)
        else:
            since = t if o != FREE else -1  # acquired at t; -1 (FREE): drop the holding
            update_holders(holders, a, b, r, min(since, 0))  # every holding acquired at 0
            update_holders(holdings, a, b, r, since)
    return t_end, DONE, 0, 0, 0


@inline_kernel
def looks(ev: Events, t: int, maps: SweepMaps, out: Pieces) -> None:
    """The rows of event t that depend only on the maps before it: what a read saw; the
    violations of a write or an alloc."""
    if ev.op[t] == READ:
        read(ev, t, maps, out)
    else:
        check_holders(ev, t, maps.holders, out)


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


def cells_of(start: np.ndarray, end: np.ndarray, in_place: bool = False) -> Cells:
    """The cells of ranges [start, end) (int32 or int64 arrays, 0 <= start <= end), holding at
    most one extra copy of one of them at a time (a node can have tens of millions of events).

    When the slots the ranges reach are few next to the ranges (a KV pool is reused again and
    again), a table over those slots numbers the cells: one pass, no sort. Otherwise the
    distinct range ends are sorted and searched. in_place: where the ranges are int32 and the
    table applies, the cell numbers are written over start and end (which are then no longer
    slots), so that no copy of them is made."""
    if len(start) == 0:
        return Cells(np.zeros(1, np.int64), np.empty(0, np.int32), np.empty(0, np.int32))
    lo, hi = int(start.min()), int(end.max())
    base = lo if lo > hi - lo else 0  # the table starts at slot 0 unless that wastes over half
    if table_applies(hi - base, len(start)):
        return _cells_by_table(start, end, base, hi, in_place)
    bounds = _distinct(np.concatenate([_distinct(start), _distinct(end)])).astype(np.int64)
    if len(bounds) >= _INT32_MAX:
        raise ValueError(f"{len(bounds)} cells do not fit int32")
    return Cells(bounds, _positions(bounds, start), _positions(bounds, end))


def table_applies(span: int, ranges: int) -> bool:
    """Whether cells_of numbers the cells of `ranges` ranges reaching over `span` slots
    through a table: when it covers fewer slots than DENSE_SLOTS_PER_RANGE per range, plus
    DENSE_SLOTS_MIN (the table costs a byte and an int32 per slot, the sort a few passes over
    every range)."""
    return span < min(DENSE_SLOTS_PER_RANGE * ranges + DENSE_SLOTS_MIN, _INT32_MAX)


DENSE_SLOTS_PER_RANGE = 8
DENSE_SLOTS_MIN = 1 << 20
_INT32_MAX = int(np.iinfo(np.int32).max)


def _cells_by_table(
    start: np.ndarray, end: np.ndarray, base: int, hi: int, in_place: bool
) -> Cells:
    """cells_of through a table over slots [base, hi]: mark every range end; a cell's number
    is the count of marks before it."""
    mark = np.zeros(hi - base + 1, dtype=np.bool_)
    _mark(mark, start, base)
    _mark(mark, end, base)
    bounds = np.flatnonzero(mark).astype(np.int64, copy=False)
    number = np.cumsum(mark, dtype=np.int32)  # slot s -> marks at or before s
    del mark
    if in_place and start.dtype == np.int32 and end.dtype == np.int32:
        _renumber(start, number, base)
        _renumber(end, number, base)
        c0, c1 = start, end
    else:
        number -= 1  # slot s -> the cell holding s (s being a range end)
        c0 = number[_shifted(start, base)]
        c1 = number[_shifted(end, base)]
    return Cells(bounds + base if base else bounds, c0, c1)


@njit(cache=True, nogil=True)
def _mark(mark, values, base):  # type: ignore[no-untyped-def]
    for i in range(values.shape[0]):
        mark[values[i] - base] = True


@njit(cache=True, nogil=True)
def _renumber(values, number, base):  # type: ignore[no-untyped-def]
    """Each slot (a range end) -> the cell it starts: the marks before it."""
    for i in range(values.shape[0]):
        values[i] = number[values[i] - base] - 1


def _shifted(values: np.ndarray, base: int) -> np.ndarray:
    return values - base if base else values


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
    if req.shape[0] >= MAX_EVENTS:  # single-holder set ids name events below it
        raise ValueError(f"{req.shape[0]:,} events on one node; at most {MAX_EVENTS - 1:,}")
    req = _narrow(req, np.int32)
    op = _narrow(op, np.int8)
    hsh = _narrow(content_hash, np.int32)
    n = max(1, len(cells.bounds) - 1)
    acq_ptr, acq_idx = acquisitions(req, op, int(req.max()) + 1)
    pool = min(2 * len(req), POOL_START)
    span = np.empty((max(1, int(np.diff(acq_ptr).max(initial=0))), 2), np.int64)
    events = Events(req, op, cells.c0, cells.c1, hsh, acq_ptr, acq_idx, span)
    maps = SweepMaps(
        new_map(n, -1),
        new_map(n, -1),
        Holders(new_map(n, 0), new_pool(pool)),
        Holders(new_map(n, 0), new_pool(pool)),
    )
    out = sweep_cells(events, maps, new_pieces(int(np.count_nonzero(op == READ)) + 1024))
    nex, ncat, nv = (int(k) for k in out.rows[[EX, CAT, VIO]])
    ex, cat, vio = out.ex[:nex], out.cat[:ncat], out.vio[:nv]
    for buf, cols in ((ex, (1, 2)), (vio, (1, 2))):
        for col in cols:
            buf[:, col] = cells.bounds[buf[:, col]]
    return ex, cat, vio


def _narrow(a: np.ndarray, dtype: type[np.integer]) -> np.ndarray:
    """a as a contiguous array of dtype, refusing values that do not fit."""
    a = np.asarray(a)
    if a.dtype != dtype and a.size:
        info = np.iinfo(dtype)
        if a.min() < info.min or a.max() > info.max:
            raise ValueError(f"values outside {np.dtype(dtype).name}: {a.min()}..{a.max()}")
    return np.ascontiguousarray(a, dtype=dtype)
