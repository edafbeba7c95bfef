"""One run of a node's rebuilt page trace (trace.py) on a page pool, operation by operation:
the pages each request holds, the allocations waiting for a free, each slot's last writer, and
what every stub's first decode read found there.

A run can be copied (its pool with it) to follow another order of events, and two runs that
reach the same state of the pool, the same pages held and the same line waiting can be merged
(`absorb`): they answer every later operation alike, so one of them goes on, keeping per slot
the other writers the merged runs left there. What the reads found goes to a `Reads` shared by
every run of one exploration."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from forensics.engines.pools import PagePool
from forensics.reconstruct.trace import ALLOC, GROW, PAGE, Event, Layout, NodeTrace, runs

StateKey = tuple[bytes, tuple[tuple[int, bytes], ...], tuple[int, ...]]


@dataclass
class Reads:
    """What the stubs' first decode reads found, over every run that made them."""

    reads: Counter[int] = field(default_factory=Counter)  # receiver -> runs that read
    support: Counter[tuple[int, int]] = field(default_factory=Counter)  # pair -> those runs
    tokens: dict[tuple[int, int], int] = field(default_factory=dict)  # pair -> most slots
    layouts: dict[int, Counter[Layout]] = field(default_factory=dict)  # receiver -> layouts
    unweighed: dict[int, set[int]] = field(default_factory=dict)  # only in merged runs' slots
    waited: set[int] = field(default_factory=set)  # allocations that waited in some run
    unread: set[int] = field(default_factory=set)  # still waiting at their first token

    def add(self, other: Reads, receivers: set[int] | None = None) -> None:
        """Add another exploration's reads: all of them, or only these receivers' (and then
        not its waiting allocations)."""

        def kept(i: int) -> bool:
            return receivers is None or i in receivers

        self.reads.update({i: n for i, n in other.reads.items() if kept(i)})
        self.support.update({p: n for p, n in other.support.items() if kept(p[0])})
        for pair, n in other.tokens.items():
            if kept(pair[0]):
                self.tokens[pair] = max(self.tokens.get(pair, 0), n)
        for i, layouts in other.layouts.items():
            if kept(i):
                self.layouts.setdefault(i, Counter()).update(layouts)
        for i, leakers in other.unweighed.items():
            if kept(i):
                self.unweighed.setdefault(i, set()).update(leakers)
        if receivers is None:
            self.waited |= other.waited
        self.unread |= {i for i in other.unread if kept(i)}

    def share(self, pair: tuple[int, int]) -> float:
        """The share of the runs that made the receiver's read in which the pair appears."""
        return self.support[pair] / max(self.reads[pair[0]], 1)


class PageRun:
    """The state of one run; `step` applies one operation (t, kind, request index)."""

    def __init__(self, trace: NodeTrace, pool: PagePool, reads: Reads, events: bool) -> None:
        self.trace, self.pool, self.sink = trace, pool, reads
        size = pool.n_pages * trace.page_size
        self.writer = np.full(size, -1, np.int32)  # request index
        self.wpos = np.full(size, -1, np.int32)  # sequence position
        self.alt: dict[int, set[tuple[int, int]]] = {}  # slot -> other (writer, position)
        self.held: dict[int, np.ndarray] = {}
        self.waiting: list[int] = []
        self.deferred = 0
        self.unread: set[int] = set()  # requests this run left waiting at their first token
        self.events: list[Event] | None = [] if events else None

    @property
    def nbytes(self) -> int:
        """The slot state a copy duplicates."""
        return int(self.writer.nbytes + self.wpos.nbytes)

    def copy(self) -> PageRun:
        """An independent run in the same state (its pool copied; events are not kept)."""
        new = PageRun.__new__(PageRun)
        new.trace, new.sink, new.pool = self.trace, self.sink, self.pool.copy()
        new.writer, new.wpos = self.writer.copy(), self.wpos.copy()
        new.alt = {s: set(v) for s, v in self.alt.items()}
        new.held, new.waiting = dict(self.held), list(self.waiting)
        new.deferred, new.events, new.unread = self.deferred, None, set(self.unread)
        return new

    def key(self) -> StateKey:
        """Runs with equal keys answer every later operation alike."""
        held = tuple(sorted((i, p.tobytes()) for i, p in self.held.items()))
        return self.pool.key(), held, tuple(self.waiting)

    def absorb(self, other: PageRun) -> None:
        """Merge a run with the same key: where the slots' writers differ, the other's are
        kept beside this one's, so every later read finds both; the other is closed."""
        differ = np.flatnonzero((self.writer != other.writer) | (self.wpos != other.wpos))
        for s in differ.tolist():
            if other.writer[s] >= 0:
                self.alt.setdefault(s, set()).add((int(other.writer[s]), int(other.wpos[s])))
        for s, alts in other.alt.items():
            self.alt.setdefault(s, set()).update(alts)
        other.close()

    def close(self) -> None:
        self.pool.close()

    def step(self, op: tuple[int, int, int]) -> None:
        t, kind, i = op
        if kind == ALLOC:
            self._alloc(t, i)
        elif kind == GROW:
            self._grow(t, i)
        elif kind == PAGE:
            if i in self.held:
                self._grow_pages(i, t, 1)
        else:
            self._free(t, i)

    def steps(self, ops: Sequence[tuple[int, int, int]]) -> None:
        """step() each operation in turn; a stretch of decode-page operations (one per token
        with one-token pages) is one call to the pool, with no free between its allocations."""
        j = 0
        while j < len(ops):
            k = j
            while k < len(ops) and ops[k][1] == PAGE:
                k += 1
            if k == j:
                self.step(ops[j])
                j += 1
                continue
            growing = [(t, i) for t, _, i in ops[j:k] if i in self.held]
            growing = growing[: self.pool.free_pages]  # one page each while any is free
            for (t, i), extra in zip(
                growing, self.pool.alloc_many([1] * len(growing)), strict=True
            ):
                self._add_pages(i, t, extra)
            j = k

    def _need(self, i: int) -> int:
        r = self.trace.reqs[i]
        n = r.processed if self.trace.role == "prefill" else r.prompt
        return -(-n // self.trace.page_size)

    def _place(self, i: int, t: int) -> bool:
        need, ps = self._need(i), self.trace.page_size
        headroom = self.trace.headroom(len(self.held))
        if headroom and (self.pool.free_pages - need) * ps < headroom:
            return False  # checked before the allocator is called, as SGLang's queue does
        pages = self.pool.alloc(need)
        if pages is None:
            return False
        self.held[i] = pages
        r, ps = self.trace.reqs[i], self.trace.page_size
        self._emit(t, i, "alloc", pages, 0, len(pages) * ps, None)
        if self.trace.role == "prefill":
            self._emit(t, i, "write", pages, 0, r.processed, "prefill")
            self._emit(t, i, "read", pages, 0, r.processed, None)
        return True

    def _admit(self, t: int) -> None:
        """Waiting allocations after a free: in line until one does not fit (fifo, reserve),
        or every one that fits, in line (fit)."""
        for i in list(self.waiting):
            if self._place(i, t):
                self.waiting.remove(i)
            elif self.trace.strict:
                return

    def _alloc(self, t: int, i: int) -> None:
        if self.waiting and self.trace.strict:
            self.waiting.append(i)  # in line behind the waiting ones, which try again first
            self._admit(t)
        elif not self._place(i, t):
            self.waiting.append(i)
        if i in self.waiting:
            self.deferred += 1
            self.sink.waited.add(i)

    def _grow(self, t: int, i: int) -> None:
        r, ps = self.trace.reqs[i], self.trace.page_size
        if i in self.waiting and self._place(i, t):
            self.waiting.remove(i)
        if i not in self.held:
            self.unread.add(i)  # its first read is not modelled: said per request
            self.sink.unread.add(i)
            return
        pages = self.held[i]
        self._emit(t - 1, i, "write", pages, 0, r.processed, "transfer")
        self._emit(t, i, "read", pages, 0, r.prompt, None)
        if r.stub and r.prompt > r.processed:
            self._read(i, slots_of(pages, r.processed, r.prompt, ps))
        end = min(r.prompt + max(r.n_out - 1, 0), len(pages) * ps)
        self._emit(t, i, "write", pages, r.prompt, end, "decode")
        if self.trace.growth == "bulk":
            self._grow_pages(i, t, -(-(r.prompt + max(r.n_out - 1, 0)) // ps) - len(pages))

    def _read(self, i: int, slots: np.ndarray) -> None:
        """A stub's first decode read: the writers of the slots it read, this run's and, in
        slots where merged runs left others, theirs too (never weighed by replay)."""
        sink, r = self.sink, self.trace.reqs[i]
        w = self.writer[slots]
        found: Counter[int] = Counter(
            dict(zip(*np.unique(w[(w >= 0) & (w != i)], return_counts=True), strict=True))
        )
        if self.alt:
            others = Counter(
                w for s in slots.tolist() for w in {a[0] for a in self.alt.get(s, ())} - {i}
            )
            found.update(others)  # at most this many more slots
            if others:
                sink.unweighed.setdefault(i, set()).update(others)
        sink.reads[i] += 1
        for leaker, n in found.items():
            pair = (i, int(leaker))
            sink.support[pair] += 1
            sink.tokens[pair] = max(sink.tokens.get(pair, 0), int(n))
        layout = _layout(i, r.processed, w, self.wpos[slots])
        sink.layouts.setdefault(i, Counter())[layout] += 1

    def _grow_pages(self, i: int, t: int, k: int) -> None:
        """k more pages for request i's decode steps (as many as are free), and their writes."""
        k = min(max(k, 0), self.pool.free_pages)
        self._add_pages(i, t, self.pool.alloc(k) if k else None)

    def _add_pages(self, i: int, t: int, extra: np.ndarray | None) -> None:
        """Pages allocated for request i's decode steps, held and written."""
        if extra is None:
            return
        r, pages, ps = self.trace.reqs[i], self.held[i], self.trace.page_size
        self._emit(t, i, "alloc", extra, 0, len(extra) * ps, None, first=len(pages))
        self.held[i] = np.concatenate((pages, extra))
        end = min(r.prompt + max(r.n_out - 1, 0), len(self.held[i]) * ps)
        self._emit(t, i, "write", self.held[i], max(r.prompt, len(pages) * ps), end, "decode")

    def _free(self, t: int, i: int) -> None:
        if i in self.waiting:
            self.waiting.remove(i)
            return
        if i not in self.held:
            return
        pages = self.held.pop(i)
        self._write(pages, i)
        self._emit(t, i, "free", pages, 0, len(pages) * self.trace.page_size, None)
        self.pool.release(pages)
        self._admit(t)

    def _write(self, pages: np.ndarray, i: int) -> None:
        """What the request left in its pages: its processed tokens, then its decode steps;
        other writers merged runs left in those slots are overwritten with them."""
        trace, r = self.trace, self.trace.reqs[i]
        ps = trace.page_size
        spans = [(0, min(r.processed, len(pages) * ps))]
        if trace.role != "prefill":
            spans.append((r.prompt, min(r.prompt + max(r.n_out - 1, 0), len(pages) * ps)))
        for p0, p1 in spans:
            if p1 <= p0:
                continue
            slots = slots_of(pages, p0, p1, ps)
            self.writer[slots] = i
            self.wpos[slots] = np.arange(p0, p1)
            if self.alt:
                for s in slots.tolist():
                    self.alt.pop(s, None)

    def _emit(
        self,
        t: int,
        i: int,
        op: str,
        pages: np.ndarray,
        p0: int,
        p1: int,
        src: str | None,
        first: int = 0,
    ) -> None:
        if self.events is None:
            return
        ps, rid = self.trace.page_size, self.trace.reqs[i].request_id
        for slot, n, pos in runs(pages, p0, p1, ps):
            at = pos + first * ps if op == "alloc" else pos
            self.events.append((t, rid, op, slot, n, at, src))


def slots_of(pages: np.ndarray, p0: int, p1: int, ps: int) -> np.ndarray:
    """The slots holding sequence positions [p0, p1) of a request with these pages."""
    pos = np.arange(p0, p1)
    return pages[pos // ps] * ps + pos % ps  # type: ignore[no-any-return]


def _layout(i: int, processed: int, writers: np.ndarray, positions: np.ndarray) -> Layout:
    """The stub's first read: its own processed positions, then what the slots held."""
    own: list[tuple[int, int] | None] = [(i, p) for p in range(processed)]
    rest = [
        None if w < 0 else (int(w), int(p))
        for w, p in zip(writers.tolist(), positions.tolist(), strict=True)
    ]
    return tuple(own + rest)
