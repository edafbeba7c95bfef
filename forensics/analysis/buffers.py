"""Growable integer row buffers for the compiled sweep's outputs.

Compiled code cannot append to a list of rows cheaply, so the three outputs are 2-D arrays that
travel together as Pieces, with their row counts in one small array updated in place: pushing a
row never rebuilds the tuple. A push past the end of a buffer only counts the row; the sweep
then sees that the event did not fit (`fits`), grows the buffers (`regrown`, dropping the
event's rows) and runs the event again. Buffers double when they grow, so that is rare, and
the common path has no allocation and no tuple to rebuild.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

import forensics.base.jitcache  # noqa: F401  (a stale compiled-code cache is recompiled)
from forensics.analysis.compiled import loop_kernel

EX, CAT, VIO = 0, 1, 2  # Pieces.rows: the row counts of ex, cat and vio, in that order


class Pieces(NamedTuple):
    """The sweep's three output buffers and the rows used in each (see forensics.analysis.sweep
    for the columns)."""

    ex: np.ndarray  # int64 exposures [read event, c0, c1, write event, kind]
    cat: np.ndarray  # int32 categories [read event, category, c0, c1]
    vio: np.ndarray  # int64 violations [event, c0, c1, violation, other request code or -1]
    rows: np.ndarray  # int64 [rows of ex, rows of cat, rows of vio], counted in place


def new_pieces(cat_rows: int) -> Pieces:
    """Empty buffers; cat_rows: the room to start with for categories (one row per read at
    least)."""
    return Pieces(
        np.empty((1024, 5), np.int64),
        np.empty((max(16, cat_rows), 4), np.int32),
        np.empty((256, 5), np.int64),
        np.zeros(3, np.int64),
    )


@njit(cache=True, nogil=True)
def grown(buf, n, rows):  # type: ignore[no-untyped-def]
    """A copy of buf's first n rows in a buffer of `rows` rows (plain loops: quick to compile)."""
    out = np.empty((rows, buf.shape[1]), dtype=buf.dtype)
    for i in range(n):
        for j in range(buf.shape[1]):
            out[i, j] = buf[i, j]
    return out


@loop_kernel
def fits(out: Pieces) -> bool:
    """Whether every row counted so far was written (no buffer ran out of room)."""
    rows = out.rows
    return (
        rows[EX] <= out.ex.shape[0]
        and rows[CAT] <= out.cat.shape[0]
        and rows[VIO] <= out.vio.shape[0]
    )


@njit(cache=True, nogil=True)
def regrown(out: Pieces, ex_rows: int, cat_rows: int, vio_rows: int) -> Pieces:
    """Pieces keeping the first rows of each buffer (the rows before the event that did not
    fit); a buffer that ran out of room becomes twice the size the event asked for, the
    others stay as they are (the categories alone take a row per read)."""
    rows = out.rows
    ex, cat, vio = out.ex, out.cat, out.vio
    if rows[EX] > ex.shape[0]:
        ex = grown(ex, ex_rows, 2 * rows[EX])
    if rows[CAT] > cat.shape[0]:
        cat = grown(cat, cat_rows, 2 * rows[CAT])
    if rows[VIO] > vio.shape[0]:
        vio = grown(vio, vio_rows, 2 * rows[VIO])
    rows[EX] = ex_rows
    rows[CAT] = cat_rows
    rows[VIO] = vio_rows
    return Pieces(ex, cat, vio, rows)


@loop_kernel
def push_category(cat, rows, t, category, x, e):  # type: ignore[no-untyped-def]
    """Append [t, category, x, e] to cat (Pieces.cat, rows: Pieces.rows), extending the previous
    row when it continues it (so a read makes one row per category run, not one per cell run of
    the maps)."""
    n = rows[CAT]
    if n > cat.shape[0]:  # already out of room: only count
        rows[CAT] = n + 1
        return
    if n > 0 and cat[n - 1, 0] == t and cat[n - 1, 1] == category and cat[n - 1, 3] == x:
        cat[n - 1, 3] = e
        return
    rows[CAT] = n + 1
    if n < cat.shape[0]:
        cat[n, 0] = t
        cat[n, 1] = category
        cat[n, 2] = x
        cat[n, 3] = e


@loop_kernel
def push_exposure(ex, rows, t, x, e, w, kind):  # type: ignore[no-untyped-def]
    """Append [t, x, e, w, kind] to ex (Pieces.ex), extending the previous row when it continues
    it."""
    n = rows[EX]
    if n > ex.shape[0]:  # already out of room: only count
        rows[EX] = n + 1
        return
    if (
        n > 0
        and ex[n - 1, 0] == t
        and ex[n - 1, 3] == w
        and ex[n - 1, 4] == kind
        and ex[n - 1, 2] == x
    ):
        ex[n - 1, 2] = e
        return
    rows[EX] = n + 1
    if n < ex.shape[0]:
        ex[n, 0] = t
        ex[n, 1] = x
        ex[n, 2] = e
        ex[n, 3] = w
        ex[n, 4] = kind


@loop_kernel
def push_violation(vio, rows, t, x, e, kind, other):  # type: ignore[no-untyped-def]
    """Append [t, x, e, kind, other] to vio (Pieces.vio; other: another request code, or -1 for
    none)."""
    n = rows[VIO]
    rows[VIO] = n + 1
    if n < vio.shape[0]:
        vio[n, 0] = t
        vio[n, 1] = x
        vio[n, 2] = e
        vio[n, 3] = kind
        vio[n, 4] = other
