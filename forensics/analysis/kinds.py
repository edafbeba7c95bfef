"""What a read saw, cell run by cell run: own data, uninitialised, a prefix-cache hit
(verified or not), or an exposure of kind stale, overwritten or prefix-mismatch.

The walk merges the runs of the coarse maps (last writer request; holder requests), so a read
of its own data costs one run however many writes and allocations made it. Only where another
request wrote last does it descend into the fine maps (the exact write; holders with the event
that acquired each holding) to classify, per docs/DESIGN.md §4:

- r holds the cells through a share that came after the write: a prefix-cache hit, verified
  when both hashes exist and are equal, unverified when one is missing, else prefix-mismatch;
- otherwise overwritten when the write came after r acquired its holding, or the writer still
  holds the cells; stale otherwise (also when r does not hold them at all).
"""

from __future__ import annotations

from forensics.analysis.buffers import Pieces, push_category, push_exposure
from forensics.analysis.codes import (
    FOREIGN,
    OVERWRITTEN,
    OWN,
    PREFIX_MISMATCH,
    READ_UNHELD,
    SHARE,
    SHARED_UNVERIFIED,
    SHARED_VERIFIED,
    STALE,
    UNINITIALISED,
)
from forensics.analysis.compiled import inline_kernel, loop_kernel
from forensics.analysis.holders import HolderPool, held_since
from forensics.analysis.kerneltypes import Events, SweepMaps
from forensics.analysis.runmap import bs_around, bs_next
from forensics.analysis.violations import push_holders

NO_KIND = -1  # classify's exposure kind for what is no exposure
NOBODY = -1  # last_writer's value where no write happened yet (and last_write's: no write event)


@loop_kernel
def classify(ev: Events, t: int, w: int, wr: int, pool: HolderPool, sid: int) -> tuple[int, int]:
    """(category, exposure kind or NO_KIND) of the read at event t, of cells last written by
    event w of request wr, held by set sid of pool."""
    ent, sets = pool.ent, pool.sets
    acq = held_since(ent, sets, sid, ev.req[t])  # the event whose holding covers the cells
    held = acq >= 0
    if held and ev.op[acq] == SHARE and acq > w:
        hsh = ev.hsh
        if hsh[acq] < 0 or hsh[w] < 0:  # -1: the ledger gave no content hash
            return SHARED_UNVERIFIED, NO_KIND
        if hsh[acq] == hsh[w]:
            return SHARED_VERIFIED, NO_KIND
        return FOREIGN, PREFIX_MISMATCH
    if (held and w > acq) or held_since(ent, sets, sid, wr) >= 0:
        return FOREIGN, OVERWRITTEN
    return FOREIGN, STALE


@inline_kernel
def foreign_run(ev: Events, t: int, wr: int, x: int, e: int, maps: SweepMaps, out: Pieces) -> None:
    """Classify [x, e) of the read at event t, last written by another request wr, along the
    fine maps (last_write: the exact write; holdings: holders with their acquisition)."""
    last_write, holdings, pool = maps.last_write, maps.holdings.runs, maps.holdings.pool
    n = last_write.n
    write_words, write_val = last_write.words, last_write.val
    holding_words, holding_val = holdings.words, holdings.val
    cat, ex, rows = out.cat, out.ex, out.rows
    # The runs of last_write and holdings holding y, and where the next ones start.
    p_w, n_w = bs_around(write_words, x, n)
    p_h, n_h = bs_around(holding_words, x, n)
    y = x
    while y < e:
        z = min(n_w, n_h, e)
        w = write_val[p_w]
        category, kind = classify(ev, t, w, wr, pool, holding_val[p_h])
        push_category(cat, rows, t, category, y, z)
        if kind != NO_KIND:
            push_exposure(ex, rows, t, y, z, w, kind)
        y = z
        if y == n_w:
            p_w = n_w
            n_w = bs_next(write_words, n_w + 1, n)
        if y == n_h:
            p_h = n_h
            n_h = bs_next(holding_words, n_h + 1, n)


@inline_kernel
def read(ev: Events, t: int, maps: SweepMaps, out: Pieces) -> None:
    """Everything the read at event t saw, as rows added to out."""
    r = ev.req[t]
    b = ev.c1[t]
    last_writer, holders, pool = maps.last_writer, maps.holders.runs, maps.holders.pool
    n = last_writer.n
    writer_words, writer_val = last_writer.words, last_writer.val
    holder_words, holder_val = holders.words, holders.val
    ent, sets = pool.ent, pool.sets
    cat, rows = out.cat, out.rows
    x = ev.c0[t]
    # The runs of last_writer and holders holding x, and where the next ones start.
    p_l, n_l = bs_around(writer_words, x, n)
    p_h, n_h = bs_around(holder_words, x, n)
    while x < b:
        e = min(n_l, n_h, b)
        wr = writer_val[p_l]
        if wr == NOBODY:
            push_category(cat, rows, t, UNINITIALISED, x, e)
        elif wr == r:
            push_category(cat, rows, t, OWN, x, e)
        else:
            foreign_run(ev, t, wr, x, e, maps, out)
        if held_since(ent, sets, holder_val[p_h], r) < 0:
            push_holders(out, t, x, e, READ_UNHELD, pool, holder_val[p_h], r)
        x = e
        if x == n_l:
            p_l = n_l
            n_l = bs_next(writer_words, n_l + 1, n)
        if x == n_h:
            p_h = n_h
            n_h = bs_next(holder_words, n_h + 1, n)
