"""How the kernels of the sweep's event loop are compiled.

`loop_kernel` compiles like the other kernels (nopython, cached on disk, releasing the GIL)
and also without reference counting (numba's `_nrt=False`). Compiled code otherwise adds and
drops a reference, with an atomic instruction and a call, for every array it hands to another
function; the loop makes several such calls per event with named tuples of up to 30 arrays,
and that counting took more than half of the sweep's time. A loop kernel may only read and
write arrays its caller owns: it cannot make one (numba refuses to compile it then). What
makes arrays, growing an output buffer or a holder pool, runs outside the loop
(forensics.analysis.sweep.sweep_cells).

`inline_kernel` is a loop kernel that numba also inlines into its callers. A compiled call
passes each array as seven machine words, so a call that takes the sweep's named tuples (the
events, the maps, the output buffers: about 370 words) costs more than most of the work it
calls for: in a profile of the sweep, nine tenths of the time spent in the event loop itself
and in `looks` was pushing arguments. The kernels called once or twice per event with those
tuples (looks, read, foreign_run, check_holders, rm_assign, update_holders) are therefore
inlined, which halved the sweep. So are the holder-set updates (set_with, set_without),
called for every run an allocation or a free meets with the pool's three arrays: inlined,
the sweep of the bench nodes took a quarter less time (its compilation 15 % more), and the
start of each walk along a range's runs (bs_around, at every read and write): 5 % less. The
small bit-set helpers (bs_next, bs_prev) stay calls: inlined at each of their many call sites
they made the loop slower (by a seventh to a third), and its compilation far longer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba import njit

import forensics.base.jitcache  # noqa: F401  (a stale compiled-code cache is recompiled)

_LOOP_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "_nrt": False}


def loop_kernel(fn: Callable[..., Any]) -> Any:
    """fn compiled as a kernel of the sweep's event loop (see the module docstring)."""
    return njit(**_LOOP_OPTIONS)(fn)


def inline_kernel(fn: Callable[..., Any]) -> Any:
    """fn compiled as a loop kernel and inlined where it is called (see the module
    docstring)."""
    return njit(**_LOOP_OPTIONS, inline="always")(fn)
