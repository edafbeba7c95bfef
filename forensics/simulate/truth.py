"""Ground truth: what every read really saw, slot by slot, from per-slot engine state.

Per node, numpy arrays hold each slot's last writer, that writer's position, the write's order,
time, source and content hash, and the (at most two) requests holding the slot by allocation;
prefix-cache shares are kept per request. The final ordered ledger chunks (ledger.py) drive these
arrays; every read is classified exactly as the exposure semantics (DESIGN.md §4) define it: own
data, uninitialised, verified or unverified prefix hit, or an exposure `overwritten`, `stale` or
`prefix-mismatch`; ownership violations are recorded too. Only slot pieces that matter are kept;
truth_tables.py turns them into the ground-truth tables."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from forensics.analysis.codes import ExposureKind
from forensics.simulate import ledger as L

OVERWRITTEN, STALE, PREFIX_MISMATCH = 0, 1, 2
# the simulator numbers the kinds its own way; their names are the analysis' ExposureKind
KINDS = tuple(
    k.value for k in (ExposureKind.OVERWRITTEN, ExposureKind.STALE, ExposureKind.PREFIX_MISMATCH)
)
# the violations' names are the analysis' (forensics.analysis.codes.VIOLATIONS), in this order
WRITE_AFTER_FREE, WRITE_UNHELD, DOUBLE_ALLOCATION, READ_UNHELD = 0, 1, 2, 3
NEVER = np.iinfo(np.int64).max


class NodeState:
    """Per-slot state of one node's pool."""

    def __init__(self, node: int, slots: int, sink: Pieces):
        self.node, self.sink = node, sink
        self.lw = np.full(slots, -1, np.int32)
        self.lpos = np.zeros(slots, np.int64)
        self.lord = np.full(slots, -1, np.int64)
        self.lts = np.zeros(slots, np.int64)
        self.lsrc = np.zeros(slots, np.int8)
        self.lhash = np.full(slots, -1, np.int32)
        self.h1 = np.full(slots, -1, np.int32)
        self.h1o = np.zeros(slots, np.int64)
        self.h2 = np.full(slots, -1, np.int32)
        self.h2o = np.zeros(slots, np.int64)
        self.shares: dict[int, list[list[int]]] = defaultdict(list)  # rid -> [a, b, order, hash]
        self.ever: dict[int, list[tuple[int, int]]] = defaultdict(list)
        self.overflow = 0

    # ---- holdings --------------------------------------------------------------------------
    def holding(self, rid: int, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For slots [a, b): when rid acquired its current holding (NEVER: not held), the order
        of a share covering the slot (-1: none) and that share's hash."""
        m1, m2 = self.h1[a:b] == rid, self.h2[a:b] == rid
        acq = np.where(m1, self.h1o[a:b], np.where(m2, self.h2o[a:b], NEVER))
        sh_ord = np.full(b - a, -1, np.int64)
        sh_hash = np.full(b - a, -1, np.int64)
        for sa, sb, order, h in self.shares.get(rid, ()):
            lo, hi = max(a, sa), min(b, sb)
            if lo < hi:
                sh_ord[lo - a : hi - a] = order
                sh_hash[lo - a : hi - a] = h
        acq = np.where((acq == NEVER) & (sh_ord >= 0), sh_ord, acq)
        return acq, sh_ord, sh_hash

    def holds(self, rid: int, slots: np.ndarray) -> np.ndarray:
        held = (self.h1[slots] == rid) | (self.h2[slots] == rid)
        for sa, sb, _, _ in self.shares.get(rid, ()):
            held |= (slots >= sa) & (slots < sb)
        return held

    def others(self, rid: int, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slot, other holder) pairs for the given slots; -1 where nobody else holds it."""
        pairs_s, pairs_o = [], []
        for h in (self.h1, self.h2):
            o = h[slots]
            keep = (o >= 0) & (o != rid)
            pairs_s.append(slots[keep])
            pairs_o.append(o[keep])
        for other, ranges in self.shares.items():
            if other == rid:
                continue
            for sa, sb, _, _ in ranges:
                keep = (slots >= sa) & (slots < sb)
                pairs_s.append(slots[keep])
                pairs_o.append(np.full(int(keep.sum()), other, np.int32))
        s, o = np.concatenate(pairs_s), np.concatenate(pairs_o)
        alone = np.setdiff1d(slots, s)
        return np.concatenate((s, alone)), np.concatenate((o, np.full(len(alone), -1, np.int32)))

    # ---- ops ------------------------------------------------------------------------------------
    def alloc(self, rid: int, a: int, b: int, order: int) -> None:
        h1, h2 = self.h1[a:b], self.h2[a:b]
        self.ever[rid].append((a, b))
        if h1.max() < 0 and h2.max() < 0 and not self._shared(rid, a, b):
            h1[:] = rid  # the common case: nobody holds these slots
            self.h1o[a:b] = order
            return
        if self._anyone_else(rid, a, b, h1, h2):
            s, o = self.others(rid, np.arange(a, b))
            keep = o >= 0
            if keep.any():
                self.sink.violation(rid, self.node, s[keep], DOUBLE_ALLOCATION, o[keep])
        c1 = (h1 == -1) | (h1 == rid)
        c2 = ~c1 & ((h2 == -1) | (h2 == rid))
        h1[c1] = rid
        self.h1o[a:b][c1] = order
        h2[c2] = rid
        self.h2o[a:b][c2] = order
        self.overflow += int((~c1 & ~c2).sum())

    def _anyone_else(self, rid: int, a: int, b: int, h1: np.ndarray, h2: np.ndarray) -> bool:
        """Whether a request other than rid holds any slot of [a, b) (cheap pre-check)."""
        if ((h1 >= 0) & (h1 != rid)).any() or ((h2 >= 0) & (h2 != rid)).any():
            return True
        return self._shared(rid, a, b)

    def _shared(self, rid: int, a: int, b: int) -> bool:
        """Whether a request other than rid holds a share overlapping [a, b)."""
        return any(
            other != rid and sa < b and a < sb
            for other, ranges in self.shares.items()
            for sa, sb, _, _ in ranges
        )

    def share(self, rid: int, a: int, b: int, order: int, hash_id: int) -> None:
        self.shares[rid].append([a, b, order, hash_id])
        self.ever[rid].append((a, b))

    def free(self, rid: int, a: int, b: int) -> None:
        for holder in (self.h1, self.h2):
            seg = holder[a:b]
            seg[seg == rid] = -1
        if rid in self.shares:
            kept: list[list[int]] = []
            for sa, sb, order, h in self.shares[rid]:
                if sa < a:
                    kept.append([sa, min(sb, a), order, h])
                if sb > b:
                    kept.append([max(sa, b), sb, order, h])
            if kept:
                self.shares[rid] = kept
            else:
                del self.shares[rid]

    def write(
        self, rid: int, a: int, b: int, order: int, ts: int, pos: int, src: int, hash_id: int
    ) -> None:
        if b - a == 1:  # a decode step: scalar updates
            if not (self.h1[a] == rid or self.h2[a] == rid):
                self.write_violation(rid, np.array([a]))
            self.lw[a], self.lpos[a], self.lord[a], self.lts[a] = rid, pos, order, ts
            self.lsrc[a], self.lhash[a] = src, hash_id
            return
        slots = np.arange(a, b)
        held = self.holds(rid, slots)
        if not held.all():
            self.write_violation(rid, slots[~held])
        self.lw[a:b] = rid
        self.lpos[a:b] = np.arange(pos, pos + b - a)
        self.lord[a:b] = order
        self.lts[a:b] = ts
        self.lsrc[a:b] = src
        self.lhash[a:b] = hash_id

    def write_violation(self, rid: int, slots: np.ndarray) -> None:
        before = np.zeros(len(slots), bool)
        for sa, sb in self.ever.get(rid, ()):
            before |= (slots >= sa) & (slots < sb)
        for mask, kind in ((before, WRITE_AFTER_FREE), (~before, WRITE_UNHELD)):
            if mask.any():
                s, o = self.others(rid, slots[mask])
                self.sink.violation(rid, self.node, s, kind, o)

    def read(self, rid: int, a: int, b: int, ts: int) -> None:
        if b - a == 1 and self.lw[a] == rid and (self.h1[a] == rid or self.h2[a] == rid):
            return
        acq, sh_ord, sh_hash = self.holding(rid, a, b)
        unheld = acq == NEVER
        if unheld.any():
            s, o = self.others(rid, np.arange(a, b)[unheld])
            self.sink.violation(rid, self.node, s, READ_UNHELD, o)
        w = self.lw[a:b]
        idx = np.flatnonzero(w != rid)
        if len(idx) == 0:
            return
        ww = w[idx]
        self.sink.count(rid, "uninitialised", int((ww < 0).sum()))
        idx, ww = idx[ww >= 0], ww[ww >= 0]
        lo = self.lord[a + idx]
        hit = sh_ord[idx] > lo
        hh, wh = sh_hash[idx], self.lhash[a + idx]
        unverified = hit & ((hh < 0) | (wh < 0))
        mismatch = hit & ~unverified & (hh != wh)
        self.sink.count(rid, "unverified_hit", int(unverified.sum()))
        self.sink.count(rid, "verified_hit", int((hit & ~unverified & ~mismatch).sum()))
        exp = ~hit | mismatch
        if not exp.any():
            return
        idx, ww, lo = idx[exp], ww[exp], lo[exp]
        slots = a + idx
        writer_holds = np.zeros(len(idx), bool)
        for w_id in np.unique(ww):
            sel = ww == w_id
            writer_holds[sel] = self.holds(int(w_id), slots[sel])
        kind = np.where(
            mismatch[exp],
            PREFIX_MISMATCH,
            np.where((lo > acq[idx]) | writer_holds, OVERWRITTEN, STALE),
        )
        self.sink.exposure(
            rid, self.node, slots, ww, kind, self.lpos[slots], ts, self.lts[slots], self.lsrc[slots]
        )

    def sources(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(writer, writer position, write source) of slots [a, b) now."""
        return self.lw[a:b].copy(), self.lpos[a:b].copy(), self.lsrc[a:b].copy()


class Pieces:
    """Collects exposure and violation slot pieces and per-request read counters."""

    def __init__(self) -> None:
        self.exp: list[tuple[np.ndarray, ...]] = []
        self.vio: list[tuple[np.ndarray, ...]] = []
        self.counters: dict[tuple[int, str], int] = defaultdict(int)

    def count(self, rid: int, what: str, n: int) -> None:
        if n:
            self.counters[(rid, what)] += n

    def violation(
        self, rid: int, node: int, slots: np.ndarray, kind: int, other: np.ndarray
    ) -> None:
        k = len(slots)
        self.vio.append(
            (
                np.full(k, rid, np.int32),
                np.full(k, node, np.int16),
                slots.astype(np.int64),
                np.full(k, kind, np.int8),
                other.astype(np.int32),
            )
        )

    def exposure(
        self,
        rid: int,
        node: int,
        slots: np.ndarray,
        writer: np.ndarray,
        kind: np.ndarray,
        wpos: np.ndarray,
        ts: int,
        wts: np.ndarray,
        wsrc: np.ndarray,
    ) -> None:
        k = len(slots)
        self.exp.append(
            (
                np.full(k, rid, np.int32),
                writer.astype(np.int32),
                np.full(k, node, np.int16),
                slots.astype(np.int64),
                kind.astype(np.int8),
                wpos.astype(np.int64),
                np.full(k, ts, np.int64),
                wts.astype(np.int64),
                wsrc.astype(np.int8),
            )
        )


def apply(state: NodeState, cols: dict[str, np.ndarray], sl: slice, on_read: object = None) -> None:
    """Drive one node's state through its events in a chunk (already in seq order)."""
    names = ("op", "rid", "start", "count", "seq", "ts", "pos", "src", "hash")
    rows = zip(*(cols[n][sl].tolist() for n in names), strict=True)
    for op, rid, a, count, order, ts, pos, src, h in rows:
        b = a + count
        if op == L.READ:
            if on_read is not None:
                on_read(state, rid, a, b, ts, pos)  # type: ignore[operator]
            state.read(rid, a, b, ts)
        elif op == L.WRITE:
            state.write(rid, a, b, order, ts, pos, src, h)
        elif op == L.ALLOC:
            state.alloc(rid, a, b, order)
        elif op == L.SHARE:
            state.share(rid, a, b, order, h)
        else:
            state.free(rid, a, b)
