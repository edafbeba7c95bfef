"""Borrowed array views for the compiled sweep: no reference counting in its hot loops.

Compiled code counts references on the arrays it passes between functions: every call, and
every read of an array out of a named tuple, adds and drops a reference with an atomic
instruction. The sweep makes several such calls per event, and those atomics cost as much as
the sweep's own work. A borrowed view is the same array (same data, shape and strides) without
the pointer to its reference count, so passing it costs nothing to count; the sweep keeps the
owning arrays alive itself, for as long as it uses their views (see sweep_cells).
"""

from __future__ import annotations

from typing import Any

from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

from forensics.analysis.buffers import Pieces
from forensics.analysis.holders import HolderPool, Holders
from forensics.analysis.runmap import RunMap


@intrinsic
def _borrowed(_typingctx: Any, ary: Any) -> Any:
    """The array ary without its owner: a view compiled code never counts references on."""
    if not isinstance(ary, types.Array):
        return None

    def codegen(context: Any, builder: Any, _signature: Any, args: Any) -> Any:
        (value,) = args
        view = context.make_array(ary)(context, builder, value=value)
        # A null owner: reference counting skips arrays without one, and nothing frees them.
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()

    return ary(ary), codegen


borrowed: Any = _borrowed  # a compile-time function: callable from compiled code only


@njit(cache=True, nogil=True)
def borrowed_map(m: RunMap) -> RunMap:
    return RunMap(borrowed(m.words), borrowed(m.offs), m.nlev, borrowed(m.val), m.n)


@njit(cache=True, nogil=True)
def borrowed_holders(h: Holders) -> Holders:
    pool = h.pool
    return Holders(
        borrowed_map(h.runs),
        HolderPool(borrowed(pool.ent), borrowed(pool.sets), borrowed(pool.cnt)),
    )


@njit(cache=True, nogil=True)
def borrowed_pieces(out: Pieces) -> Pieces:
    return Pieces(borrowed(out.ex), borrowed(out.cat), borrowed(out.vio), borrowed(out.rows))
