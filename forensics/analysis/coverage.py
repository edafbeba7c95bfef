"""What each request's reads on a node saw, in distinct slots per category: the figures of
read_stats, computed from the sweep's category pieces without sending them back to DuckDB."""

from __future__ import annotations

import numpy as np
from numba import njit

from forensics.analysis.codes import CATEGORIES, READ


@njit(cache=True, nogil=True)
def _add_unions(req, cat, lo, hi, out):
    """Add to out[r, c] the size of the union of [lo, hi) over each (r, c) group; rows sorted
    by (r, c, lo)."""
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
                total += b - a
                a = lo[i]
                b = hi[i]
            elif hi[i] > b:
                b = hi[i]
            i += 1
        out[r, c] += total + b - a


def read_counts(req: np.ndarray, op: np.ndarray, categories: np.ndarray) -> np.ndarray:
    """One row per request with a read on the node: `[request code, reads, distinct slots per
    category in CATEGORIES order]`, by request code.

    req, op: the node's events in order; categories: the sweep's rows
    `[read event, category, slot_start, slot_end]`."""
    if req.shape[0] == 0:
        return np.empty((0, 2 + len(CATEGORIES)), np.int64)
    n_req = int(req.max()) + 1
    reads = np.bincount(req[op == READ], minlength=n_req)
    slots = np.zeros((n_req, len(CATEGORIES)), np.int64)
    if categories.shape[0]:
        who = req[categories[:, 0]].astype(np.int64)
        order = np.lexsort((categories[:, 2], categories[:, 1], who))
        _add_unions(
            who[order],
            np.ascontiguousarray(categories[order, 1]),
            np.ascontiguousarray(categories[order, 2]),
            np.ascontiguousarray(categories[order, 3]),
            slots,
        )
    readers = np.flatnonzero(reads)
    return np.column_stack([readers, reads[readers], slots[readers]]).astype(np.int64)
