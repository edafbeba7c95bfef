"""One node's page trace, rebuilt from the request log and replayed on an allocator.

Operations per request (gateway timestamps, microseconds):

- decode (and unified) nodes: ALLOC of the billed prompt's pages when the request is received
  (the decode node pre-allocates from its own copy of the request); GROW at the first token:
  the first decode step reads the whole billed prompt and the pages for the completion tokens
  are allocated; FREE of every page at completion. The KV written into the pages is the
  transfer (positions 0 .. processed-1: the whole prompt, or 1 token for a stub) and the
  decode steps (positions prompt .. prompt+completion-2).
- prefill nodes: ALLOC of the processed tokens' pages when received, FREE at the first token
  (the transfer is done when decode starts).

A stub's first decode step reads positions processed .. prompt-1 from whatever the slots last
held: those slots' writers are its exposures. Operations closer than `skew_us` form a group
whose order the timestamps do not decide; `orders` explores shuffles of those groups (each
request's own operations stay in order) and counts, per (receiver, leaker), the share of
explored orders in which the pair appears."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from forensics.engines.pools import PagePool

FREE, ALLOC, GROW, PAGE = 0, 1, 2, 3  # rank at equal times: frees first


@dataclass(frozen=True)
class Req:
    request_id: str
    account_id: str
    received_us: int
    first_token_us: int | None
    completed_us: int | None
    prompt: int
    n_out: int
    stub: bool
    cached_tokens: int | None = None  # the usage's prefix-cache hit tokens, where logged

    @property
    def processed(self) -> int:
        return 1 if self.stub else self.prompt


@dataclass
class NodeTrace:
    node: str
    role: str
    page_size: int
    pool_slots: int
    reqs: list[Req]
    growth: str = "paged"  # decode pages: one by one as the steps reach them, or all at once
    policy: str = "fifo"  # waiting allocations: strictly in line, or any that fits goes first
    ops: list[tuple[int, int, int]] = field(init=False)  # (t, kind, request index)
    groups: list[tuple[int, int]] = field(init=False)  # [start, end) of ambiguous groups

    def __post_init__(self) -> None:
        self.ops = sorted(self._ops(), key=lambda o: (o[0], o[1], self.reqs[o[2]].request_id))

    def _ops(self) -> Iterator[tuple[int, int, int]]:
        for i, r in enumerate(self.reqs):
            yield r.received_us, ALLOC, i
            if self.role == "prefill":
                end = r.first_token_us if r.first_token_us is not None else r.completed_us
                if end is not None:
                    yield max(end, r.received_us), FREE, i
                continue
            if r.first_token_us is not None:
                yield max(r.first_token_us, r.received_us), GROW, i
                if self.growth == "paged":
                    yield from self._pages(r, i)
            if r.completed_us is not None:
                yield max(r.completed_us, r.first_token_us or r.received_us), FREE, i

    def _pages(self, r: Req, i: int) -> Iterator[tuple[int, int, int]]:
        """One allocation per decode page, at the time of the step that first writes it: the
        steps are spread evenly between the first token and completion."""
        if r.completed_us is None or r.first_token_us is None:
            return
        ps, first = self.page_size, max(r.first_token_us, r.received_us)
        span = max(r.completed_us - first, 0) / max(r.n_out, 1)
        for pos in range(-(-r.prompt // ps) * ps, r.prompt + max(r.n_out - 1, 0), ps):
            yield first + int(span * (pos - r.prompt + 1)), PAGE, i

    def find_groups(self, skew_us: int) -> None:
        """Runs of operations each closer than skew_us to the previous one, with at least two
        requests: the timestamps do not order them."""
        self.groups = []
        start = 0
        for k in range(1, len(self.ops) + 1):
            if k == len(self.ops) or self.ops[k][0] - self.ops[k - 1][0] >= skew_us:
                if len({o[2] for o in self.ops[start:k]}) > 1:
                    self.groups.append((start, k))
                start = k

    def order(self, k: int) -> list[tuple[int, int, int]]:
        """Explored order k: 0 is the timestamps' order; others shuffle every ambiguous group,
        keeping each request's own operations in their order."""
        if k == 0:
            return self.ops
        rng = np.random.default_rng([k, len(self.ops)])
        ops = list(self.ops)
        for a, b in self.groups:
            part = ops[a:b]
            keys = rng.random(len(part))
            by_req: dict[int, list[int]] = {}
            for j, op in enumerate(part):
                by_req.setdefault(op[2], []).append(j)
            for idx in by_req.values():  # own operations keep their order
                for j, key in zip(idx, sorted(keys[idx]), strict=True):
                    keys[j] = key
            ops[a:b] = [part[j] for j in np.argsort(keys, kind="stable")]
        return ops


Event = tuple[int, str, str, int, int, int, str | None]  # ts, request, op, slot, count, pos, src
Layout = tuple[tuple[int, int] | None, ...]  # per reader position: (writer index, its position)


@dataclass
class Outcome:
    exposures: dict[tuple[int, int], int] = field(default_factory=dict)  # (recv, leaker) -> n
    events: list[Event] = field(default_factory=list)
    deferred: int = 0
    layouts: dict[int, Layout] = field(default_factory=dict)  # stub receiver -> what it read
    waited: set[int] = field(default_factory=set)  # requests whose allocation waited
    unread: set[int] = field(default_factory=set)  # still waiting at their first token


def runs(pages: np.ndarray, p0: int, p1: int, ps: int) -> Iterator[tuple[int, int, int]]:
    """(slot_start, slot_count, pos_start) of contiguous slot runs holding positions [p0, p1)."""
    pos = p0
    while pos < p1:
        g = pos // ps
        h = g
        while (h + 1) * ps < p1 and pages[h + 1] == pages[h] + 1:
            h += 1
        end = min((h + 1) * ps, p1)
        yield int(pages[g]) * ps + pos - g * ps, end - pos, pos
        pos = end


def replay(
    trace: NodeTrace, ops: list[tuple[int, int, int]], pool: PagePool, events: bool
) -> Outcome:
    """Drive `pool` through the operations; the exposures of every stub's first decode read."""
    ps, reqs = trace.page_size, trace.reqs
    writer = np.full(pool.n_pages * ps, -1, np.int64)
    wpos = np.full(pool.n_pages * ps, -1, np.int64)
    held: dict[int, np.ndarray] = {}
    waiting: list[int] = []
    out = Outcome()
    emit: Callable[..., None] = _emitter(out, trace, events)

    def need(i: int) -> int:
        n = reqs[i].processed if trace.role == "prefill" else reqs[i].prompt
        return -(-n // ps)

    def place(i: int, t: int) -> bool:
        pages = pool.alloc(need(i))
        if pages is None:
            return False
        held[i] = pages
        emit(t, i, "alloc", pages, 0, len(pages) * ps, None)
        if trace.role == "prefill":
            emit(t, i, "write", pages, 0, reqs[i].processed, "prefill")
            emit(t, i, "read", pages, 0, reqs[i].processed, None)
        return True

    def admit(t: int) -> None:
        """Waiting allocations after a free: in line until one does not fit (fifo), or every
        one that fits, in line (fit)."""
        for i in list(waiting):
            if place(i, t):
                waiting.remove(i)
            elif trace.policy == "fifo":
                return

    def grow_pages(i: int, t: int, k: int) -> None:
        """k more pages for request i's decode steps (as many as are free), and their writes."""
        r, pages = reqs[i], held[i]
        k = min(max(k, 0), pool.free_pages)
        extra = pool.alloc(k) if k else None
        if extra is not None:
            emit(t, i, "alloc", extra, 0, k * ps, None, first=len(pages))
            held[i] = np.concatenate((pages, extra))
            end = min(r.prompt + max(r.n_out - 1, 0), len(held[i]) * ps)
            emit(t, i, "write", held[i], max(r.prompt, len(pages) * ps), end, "decode")

    for t, kind, i in ops:
        r = reqs[i]
        if kind == ALLOC:
            if waiting and trace.policy == "fifo":
                waiting.append(i)  # in line behind the waiting ones, which try again first
                admit(t)
            elif not place(i, t):
                waiting.append(i)
            if i in waiting:
                out.deferred += 1
                out.waited.add(i)
        elif kind == GROW:
            if i in waiting and place(i, t):
                waiting.remove(i)
            if i not in held:
                out.unread.add(i)  # its first read is not modelled: said per request
                continue
            pages = held[i]
            emit(t - 1, i, "write", pages, 0, r.processed, "transfer")
            emit(t, i, "read", pages, 0, r.prompt, None)
            if r.stub and r.prompt > r.processed:
                slots = _slots(pages, r.processed, r.prompt, ps)
                w = writer[slots]
                out.layouts[i] = _layout(i, r, writer[slots], wpos[slots])
                for leaker, n in zip(
                    *np.unique(w[(w >= 0) & (w != i)], return_counts=True), strict=True
                ):
                    out.exposures[(i, int(leaker))] = int(n)
            end = min(r.prompt + max(r.n_out - 1, 0), len(pages) * ps)
            emit(t, i, "write", pages, r.prompt, end, "decode")
            if trace.growth == "bulk":
                grow_pages(i, t, -(-(r.prompt + max(r.n_out - 1, 0)) // ps) - len(pages))
        elif kind == PAGE:
            if i in held:
                grow_pages(i, t, 1)
        else:
            if i in waiting:
                waiting.remove(i)
                continue
            if i not in held:
                continue
            pages = held.pop(i)
            _write(writer, wpos, pages, trace, r, i)
            emit(t, i, "free", pages, 0, len(pages) * ps, None)
            pool.release(pages)
            admit(t)
    return out


def _slots(pages: np.ndarray, p0: int, p1: int, ps: int) -> np.ndarray:
    pos = np.arange(p0, p1)
    return pages[pos // ps] * ps + pos % ps  # type: ignore[no-any-return]


def _write(
    writer: np.ndarray, wpos: np.ndarray, pages: np.ndarray, trace: NodeTrace, r: Req, i: int
) -> None:
    """What the request left in its pages: its processed tokens, then its decode steps."""
    ps = trace.page_size
    n = min(r.processed, len(pages) * ps)
    writer[_slots(pages, 0, n, ps)] = i
    wpos[_slots(pages, 0, n, ps)] = np.arange(n)
    if trace.role != "prefill":
        end = min(r.prompt + max(r.n_out - 1, 0), len(pages) * ps)
        writer[_slots(pages, r.prompt, end, ps)] = i
        wpos[_slots(pages, r.prompt, end, ps)] = np.arange(r.prompt, end)


def _layout(i: int, r: Req, writers: np.ndarray, positions: np.ndarray) -> Layout:
    """The stub's first read: its own processed positions, then what the slots held."""
    own: list[tuple[int, int] | None] = [(i, p) for p in range(r.processed)]
    rest = [
        None if w < 0 else (int(w), int(p))
        for w, p in zip(writers.tolist(), positions.tolist(), strict=True)
    ]
    return tuple(own + rest)


def _emitter(out: Outcome, trace: NodeTrace, on: bool) -> Callable[..., None]:
    ps = trace.page_size

    def emit(
        t: int,
        i: int,
        op: str,
        pages: np.ndarray,
        p0: int,
        p1: int,
        src: str | None,
        first: int = 0,
    ) -> None:
        if not on:
            return
        rid = trace.reqs[i].request_id
        for slot, n, pos in runs(pages, p0, p1, ps):
            out.events.append(
                (t, rid, op, slot, n, pos + first * ps if op == "alloc" else pos, src)
            )

    return emit
