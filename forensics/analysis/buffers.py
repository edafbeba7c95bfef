"""Growable integer row buffers for the compiled sweep's outputs.

Compiled code cannot append to a list of rows cheaply, so each output is a 2-D array with a row
count beside it; when it is full, `push` copies it into one twice as large and returns that.
The three outputs travel together as Pieces.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit


class Pieces(NamedTuple):
    """The sweep's three output buffers and the rows used in each (see forensics.analysis.sweep
    for the columns). Functions that push return a new Pieces: a buffer may have been grown."""

    ex: np.ndarray  # int64 exposures [read event, c0, c1, write event, kind]
    nex: int
    cat: np.ndarray  # int32 categories [read event, category, c0, c1]
    ncat: int
    vio: np.ndarray  # int64 violations [event, c0, c1, violation, other request code or -1]
    nv: int


def new_pieces(cat_rows: int) -> Pieces:
    """Empty buffers; cat_rows: the room to start with for categories (one row per read at
    least)."""
    return Pieces(
        np.empty((1024, 5), np.int64),
        0,
        np.empty((max(16, cat_rows), 4), np.int32),
        0,
        np.empty((256, 5), np.int64),
        0,
    )


@njit(cache=True, nogil=True)
def grown(buf, n, rows):
    """A copy of buf's first n rows in a buffer of `rows` rows (plain loops: quick to compile)."""
    out = np.empty((rows, buf.shape[1]), dtype=buf.dtype)
    for i in range(n):
        for j in range(buf.shape[1]):
            out[i, j] = buf[i, j]
    return out


@njit(cache=True, nogil=True)
def push(buf, n, a, b, c, d, e):
    """Write row n (columns beyond the buffer's width are ignored); returns the buffer, grown
    when full. The caller counts rows."""
    if n >= buf.shape[0]:
        buf = grown(buf, n, 2 * buf.shape[0] + 16)
    buf[n, 0] = a
    buf[n, 1] = b
    buf[n, 2] = c
    buf[n, 3] = d
    if buf.shape[1] > 4:
        buf[n, 4] = e
    return buf


@njit(cache=True, nogil=True, inline="always")
def push_category(out: Pieces, t: int, category: int, x: int, e: int) -> Pieces:
    """Append [t, category, x, e], extending the previous row when it continues it (so a read
    makes one row per category run, not one per cell run of the maps)."""
    cat, n = out.cat, out.ncat
    if n > 0 and cat[n - 1, 0] == t and cat[n - 1, 1] == category and cat[n - 1, 3] == x:
        cat[n - 1, 3] = e
        return out
    cat = push(cat, n, t, category, x, e, np.int64(0))
    return Pieces(out.ex, out.nex, cat, n + 1, out.vio, out.nv)


@njit(cache=True, nogil=True, inline="always")
def push_exposure(out: Pieces, t: int, x: int, e: int, w: int, kind: int) -> Pieces:
    """Append [t, x, e, w, kind], extending the previous row when it continues it."""
    ex, n = out.ex, out.nex
    if (
        n > 0
        and ex[n - 1, 0] == t
        and ex[n - 1, 3] == w
        and ex[n - 1, 4] == kind
        and ex[n - 1, 2] == x
    ):
        ex[n - 1, 2] = e
        return out
    ex = push(ex, n, t, x, e, w, kind)
    return Pieces(ex, n + 1, out.cat, out.ncat, out.vio, out.nv)


@njit(cache=True, nogil=True, inline="always")
def push_violation(out: Pieces, t: int, x: int, e: int, kind: int, other: int) -> Pieces:
    """Append [t, x, e, kind, other] (other: another request code, or -1 for none)."""
    vio = push(out.vio, out.nv, t, x, e, kind, other)
    return Pieces(out.ex, out.nex, out.cat, out.ncat, vio, out.nv + 1)
