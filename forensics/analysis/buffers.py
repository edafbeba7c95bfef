"""Growable integer row buffers for the compiled sweep's outputs."""

from __future__ import annotations

import numpy as np
from numba import njit


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


@njit(cache=True, nogil=True)
def push_category(cat, n, t, kind, x, e):
    """Append [t, kind, x, e], extending the previous row when it continues it."""
    if n > 0 and cat[n - 1, 0] == t and cat[n - 1, 1] == kind and cat[n - 1, 3] == x:
        cat[n - 1, 3] = e
        return cat, n
    return push(cat, n, t, kind, x, e, np.int64(0)), n + 1


@njit(cache=True, nogil=True)
def push_exposure(ex, n, t, x, e, w, kind):
    """Append [t, x, e, w, kind], extending the previous row when it continues it."""
    if (
        n > 0
        and ex[n - 1, 0] == t
        and ex[n - 1, 3] == w
        and ex[n - 1, 4] == kind
        and ex[n - 1, 2] == x
    ):
        ex[n - 1, 2] = e
        return ex, n
    return push(ex, n, t, x, e, w, kind), n + 1
