"""Slot-range arithmetic on the sweep's pieces, per node, before they go back to DuckDB:
what each request's reads saw in distinct slots per category (the figures of read_stats), and
the runs that exposure pieces coalesce into."""

from __future__ import annotations

import numpy as np
from numba import njit

import forensics.base.jitcache  # noqa: F401  (a stale compiled-code cache is recompiled)
from forensics.analysis.codes import CATEGORIES, READ


@njit(cache=True, nogil=True)
def _add_unions(req, cat, lo, hi, bounds, out):
    """Add to out[r, c] the size in slots of the union of cell ranges [lo, hi) over each (r, c)
    group (cell k is slots [bounds[k], bounds[k + 1])); rows sorted by (r, c, lo)."""
    i = 0
    n = req.shape[0]
    while i < n:
        r = req[i]
        c = cat[i]
        a = lo[i]
        b = hi[i]
        total = 0
        i += 1
        while i < n and req[i] == r and cat[i] == c:
            if lo[i] > b:
                total += bounds[b] - bounds[a]
                a = lo[i]
                b = hi[i]
            elif hi[i] > b:
                b = hi[i]
            i += 1
        out[r, c] += total + bounds[b] - bounds[a]


def read_counts(
    req: np.ndarray, op: np.ndarray, categories: np.ndarray, bounds: np.ndarray | None = None
) -> np.ndarray:
    """One row per request with a read on the node: `[request code, reads, distinct slots per
    category in CATEGORIES order]`, by request code.

    req, op: the node's events in order; categories: the sweep's rows
    `[read event, category, c0, c1]` in cells whose slot boundaries are `bounds`
    (forensics.analysis.sweep.Cells), or in slots when bounds is None."""
    if req.shape[0] == 0:
        return np.empty((0, 2 + len(CATEGORIES)), np.int64)
    n_req = int(req.max()) + 1
    reads = _reads_per_request(req, op, n_req)
    slots = np.zeros((n_req, len(CATEGORIES)), np.int64)
    if categories.shape[0]:
        if bounds is None:
            bounds = np.arange(int(categories[:, 3].max()) + 1, dtype=np.int64)
        add_unions(req, categories, bounds, slots)
    readers = np.flatnonzero(reads)
    return np.column_stack([readers, reads[readers], slots[readers]]).astype(np.int64)


@njit(cache=True, nogil=True)
def _reads_per_request(req, op, n_req):
    """The read events of each request code (np.bincount of req[op == READ], in one pass)."""
    out = np.zeros(n_req, np.int64)
    for i in range(req.shape[0]):
        if op[i] == READ:
            out[req[i]] += 1
    return out


MARKS, SORTED, LEXSORT = "marks", "sorted", "lexsort"  # how add_unions goes about it


def add_unions(
    req: np.ndarray,
    categories: np.ndarray,
    bounds: np.ndarray,
    out: np.ndarray,
    how: str | None = None,
) -> None:
    """Add to out[r, c] the size in slots of the union of the ranges of request r's rows of
    category c (categories as in read_counts, cell k being slots [bounds[k], bounds[k + 1])).
    `how` (union_method when None): MARKS or SORTED group the rows by request and category
    in one counting pass and then mark the cells each group covers, or sort each group's rows;
    LEXSORT sorts every row at once, for cells that do not fit int32."""
    how = how or union_method(categories)
    if how == LEXSORT:
        who = req[categories[:, 0]]
        order = _by_request_category_start(who, categories[:, 1], categories[:, 2], out.shape[0])
        _add_unions(
            who[order],
            categories[order, 1],
            categories[order, 2],
            categories[order, 3],
            bounds,
            out,
        )
    else:
        _union_by_bucket(req, categories, bounds, out, how == MARKS)


def union_method(categories: np.ndarray) -> str:
    """MARKS while the rows cover at most MARK_CELLS_PER_ROW cells each on average (a read's
    pieces are a few cells: marking costs the cells covered), SORTED beyond, LEXSORT when a
    cell does not fit int32."""
    lo, hi = categories[:, 2], categories[:, 3]
    if len(lo) and (int(lo.min()) < 0 or int(hi.max()) > _INT32_MAX):
        return LEXSORT
    covered = int(np.subtract(hi, lo, dtype=np.int64).sum())
    return MARKS if covered <= MARK_CELLS_PER_ROW * len(lo) + (1 << 16) else SORTED


MARK_CELLS_PER_ROW = 16
_INT32_MAX = int(np.iinfo(np.int32).max)


@njit(cache=True, nogil=True)
def _union_by_bucket(req, categories, bounds, out, by_marks):
    """add_unions, MARKS or SORTED: the rows are placed by (request, category) in one counting
    pass, each as one int64 (start << 32 | end, both below 2^31); then each group's union, by
    marking the cells it covers (by_marks) or by sorting its rows in place."""
    n_cat = out.shape[1]
    n = categories.shape[0]
    # start[g + 1]: first the end of group g; the placing pass, run backwards, moves it down to
    # the group's first row, so that group g is packed[start[g + 1]:start[g + 2]], in row order.
    start = np.zeros(out.shape[0] * n_cat + 2, np.int64)
    for i in range(n):
        start[req[categories[i, 0]] * n_cat + categories[i, 1] + 1] += 1
    for g in range(1, start.shape[0]):
        start[g] += start[g - 1]
    packed = np.empty(n, np.int64)
    for i in range(n - 1, -1, -1):
        g = req[categories[i, 0]] * n_cat + categories[i, 1]
        start[g + 1] -= 1
        packed[start[g + 1]] = (np.int64(categories[i, 2]) << 32) | np.int64(categories[i, 3])
    start = start[1:]
    low = np.int64(0xFFFFFFFF)
    marked = np.full(bounds.shape[0] if by_marks else 0, -1, np.int64)  # cell -> its group
    for g in range(start.shape[0] - 1):
        s, e = start[g], start[g + 1]
        if s == e:
            continue
        rows = packed[s:e]
        total = 0
        if by_marks:
            for k in range(e - s):
                for c in range(rows[k] >> 32, rows[k] & low):
                    if marked[c] != g:
                        marked[c] = g
                        total += bounds[c + 1] - bounds[c]
        else:
            rows.sort()
            a = rows[0] >> 32
            b = rows[0] & low
            for k in range(1, e - s):
                lo = rows[k] >> 32
                hi = rows[k] & low
                if lo > b:
                    total += bounds[b] - bounds[a]
                    a = lo
                    b = hi
                elif hi > b:
                    b = hi
            total += bounds[b] - bounds[a]
        out[g // n_cat, g % n_cat] += total


def _by_request_category_start(
    who: np.ndarray, cat: np.ndarray, lo: np.ndarray, n_req: int
) -> np.ndarray:
    """The permutation that sorts rows by (who, cat, lo), ties in any order. Where the three
    fit one int64 (request codes below 2^29 with cells or slots below 2^31, in practice always),
    one sort of that key replaces numpy's three-key lexsort, at a fifth of its cost."""
    lo_bits = int(lo.max()).bit_length() if len(lo) else 0
    cat_bits = (len(CATEGORIES) - 1).bit_length()
    if int(lo.min(initial=0)) < 0 or (n_req - 1).bit_length() + cat_bits + lo_bits > 62:
        return np.lexsort((lo, cat, who))
    key = who.astype(np.int64) << (cat_bits + lo_bits)
    key |= cat.astype(np.int64) << lo_bits
    key |= lo.astype(np.int64)
    return np.argsort(key)


@njit(cache=True, nogil=True)
def _number_runs(new_group, lo, hi, out):
    run = -1
    reach = 0
    for i in range(lo.shape[0]):
        if new_group[i] or lo[i] > reach:
            run += 1
            reach = hi[i]
        elif hi[i] > reach:
            reach = hi[i]
        out[i] = run


def run_numbers(
    groups: tuple[np.ndarray, ...], lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(order, run number) of ranges [lo, hi): `order` sorts them by (groups..., lo, hi), ties
    in input order; the ranges of a group merge into maximal runs, where a new run starts only
    at a range that begins after every earlier end (overlapping or touching ranges share a
    run)."""
    order = _by_groups_start_end(groups, lo, hi)
    new_group = np.zeros(len(order), dtype=np.bool_)
    if len(order):
        new_group[0] = True
        for g in groups:
            s = g[order]
            new_group[1:] |= s[1:] != s[:-1]
    runs = np.empty(len(order), dtype=np.int64)
    _number_runs(new_group, lo[order], hi[order], runs)
    return order, runs


def _by_groups_start_end(
    groups: tuple[np.ndarray, ...], lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """The stable permutation that sorts rows by (groups..., lo, hi): numpy's lexsort on those
    keys. Where the groups and lo fit one int64 (exposure pieces: two request codes, a kind
    and a slot), one stable sort of that key, then a pass that orders each stretch of equal
    keys by hi (stretches are a few rows: the same slots read again), at about a third of the
    lexsort's cost."""
    keys = (*groups, lo)
    if any(int(k.min(initial=0)) < 0 for k in keys):
        return np.lexsort((hi, *reversed(keys)))
    bits = [int(k.max(initial=0)).bit_length() for k in keys]
    if sum(bits) > 62:
        return np.lexsort((hi, *reversed(keys)))
    packed = np.zeros(len(lo), dtype=np.int64)
    for k, b in zip(keys, bits, strict=True):
        packed <<= b
        packed |= k.astype(np.int64, copy=False)
    order = np.argsort(packed, kind="stable")
    _ties_by_end(packed, np.asarray(hi, np.int64), order)
    return order


@njit(cache=True, nogil=True)
def _ties_by_end(key, hi, order):
    """Within each stretch of order whose rows share key, sort by hi, stably (insertion sort
    for the usual short stretches, a merge sort for long ones)."""
    n = order.shape[0]
    i = 0
    while i < n:
        j = i + 1
        while j < n and key[order[j]] == key[order[i]]:
            j += 1
        if j - i > 32:
            stretch = order[i:j].copy()
            order[i:j] = stretch[np.argsort(hi[stretch], kind="mergesort")]
            i = j
            continue
        for a in range(i + 1, j):
            x = order[a]
            b = a - 1
            while b >= i and hi[order[b]] > hi[x]:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x
        i = j
