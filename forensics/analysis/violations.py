"""Ownership violations found by the compiled sweep (see the semantics in docs/DESIGN.md §4):
write-after-free, write-unheld, double-allocation, read-unheld. Rows are
`[event, c0, c1, violation, other request code or -1]`, one per other holder."""

from __future__ import annotations

from forensics.analysis.buffers import Pieces, push_violation
from forensics.analysis.codes import DOUBLE_ALLOCATION, WRITE, WRITE_AFTER_FREE, WRITE_UNHELD
from forensics.analysis.compiled import inline_kernel, loop_kernel
from forensics.analysis.holders import HolderPool, Holders, held_since, single_holder
from forensics.analysis.kerneltypes import Events
from forensics.analysis.runmap import bs_around, bs_next

NO_OTHER = -1  # the "other request" column when no other request is involved


@loop_kernel
def push_holders(
    out: Pieces, t: int, x: int, e: int, kind: int, pool: HolderPool, sid: int, skip: int
) -> None:
    """One row per holder in set sid other than skip; one row with NO_OTHER when there is none
    (except for double-allocation, which needs another holder)."""
    any_other = False
    ent, vio, rows = pool.ent, out.vio, out.rows
    if sid < 0:  # a single holder, kept in the map
        holder = single_holder(sid)
        if holder != skip:
            push_violation(vio, rows, t, x, e, kind, holder)
            any_other = True
    else:
        off = pool.sets[sid, 0]
        for i in range(off, off + pool.sets[sid, 1]):
            if ent[i, 0] != skip:
                push_violation(vio, rows, t, x, e, kind, ent[i, 0])
                any_other = True
    if not any_other and kind != DOUBLE_ALLOCATION:
        push_violation(vio, rows, t, x, e, kind, NO_OTHER)


@loop_kernel
def unheld_write(
    ev: Events, t: int, x: int, e: int, pool: HolderPool, sid: int, out: Pieces
) -> None:
    """Rows for the write at event t of cells [x, e), which its request r does not hold (the
    holders are set sid): write-after-free where an earlier alloc/share of r covered the cells,
    write-unheld elsewhere."""
    r = ev.req[t]
    acq_ptr, acq_idx, c0, c1, span = ev.acq_ptr, ev.acq_idx, ev.c0, ev.c1, ev.span
    k = 0
    for i in range(acq_ptr[r], acq_ptr[r + 1]):  # r's holdings before t that meet [x, e)
        j = acq_idx[i]
        if j >= t:
            break
        lo = max(x, c0[j])
        hi = min(e, c1[j])
        if lo < hi:
            m = k  # insertion by start: an unheld write meets few holdings
            while m > 0 and span[m - 1, 0] > lo:
                span[m, 0] = span[m - 1, 0]
                span[m, 1] = span[m - 1, 1]
                m -= 1
            span[m, 0] = lo
            span[m, 1] = hi
            k += 1
    cur = x
    i = 0
    while i < k:  # merge overlapping holdings; the gaps between them are write-unheld
        s0 = span[i, 0]
        s1 = span[i, 1]
        i += 1
        while i < k and span[i, 0] <= s1:
            s1 = max(s1, span[i, 1])
            i += 1
        if cur < s0:
            push_holders(out, t, cur, s0, WRITE_UNHELD, pool, sid, r)
        push_holders(out, t, s0, s1, WRITE_AFTER_FREE, pool, sid, r)
        cur = s1
    if cur < e:
        push_holders(out, t, cur, e, WRITE_UNHELD, pool, sid, r)


@inline_kernel
def check_holders(ev: Events, t: int, h: Holders, out: Pieces) -> None:
    """Violations of event t against the holder map h: for a write, the cells its request does
    not hold; for an alloc, the cells others hold."""
    r = ev.req[t]
    b = ev.c1[t]
    is_write = ev.op[t] == WRITE
    words, hv, n = h.runs.words, h.runs.val, h.runs.n
    pool = h.pool
    ent, sets = pool.ent, pool.sets
    x = ev.c0[t]
    p_h, n_h = bs_around(words, x, n)
    while x < b:  # each run of holders in [x, b)
        e = min(n_h, b)
        sid = hv[p_h]
        if not is_write:
            push_holders(out, t, x, e, DOUBLE_ALLOCATION, pool, sid, r)
        elif held_since(ent, sets, sid, r) < 0:
            unheld_write(ev, t, x, e, pool, sid, out)
        x = e
        p_h = e
        if x < b:
            n_h = bs_next(words, x + 1, n)
