"""Compiled inner loops of the page pools (numba): pages popped from and pushed back onto a LIFO
free list, counting holders."""

from __future__ import annotations

import numpy as np
from numba import njit

import forensics.base.jitcache  # noqa: F401  (a stale compiled-code cache is recompiled)


@njit(cache=True)
def pop_pages(stack, top, refs, k):  # type: ignore[no-untyped-def]
    """Pop k pages from the top of the LIFO stack (the top first); count one holder each."""
    pages = np.empty(k, np.int64)
    for j in range(k):
        p = stack[top - 1 - j]
        pages[j] = p
        refs[p] += 1
    return pages


@njit(cache=True)
def push_pages(stack, top, refs, pages):  # type: ignore[no-untyped-def]
    """Drop one holder of each page; pages left unheld go on top, pages[0] ending on top.
    Returns the new top."""
    free = np.empty(len(pages), np.int64)
    n = 0
    for p in pages:
        refs[p] -= 1
        if refs[p] == 0:
            free[n] = p
            n += 1
    for j in range(n):
        stack[top + j] = free[n - 1 - j]
    return top + n
