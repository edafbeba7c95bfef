"""One node's page trace, rebuilt from the request log (runs of it on a pool: pagerun.py;
every order the timestamps leave open: orders.py).

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
whose order the timestamps do not decide (`find_groups`); each request's own operations stay
in their order."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

FREE, ALLOC, GROW, PAGE = 0, 1, 2, 3  # rank at equal times: frees first
# The decode headroom (tokens per request) a line may keep: SGLang's default
# --num-reserved-decode-tokens, and smaller settings of it
RESERVED_DECODE_TOKENS = (512, 256, 128)
Op = tuple[int, int, int]  # (time in microseconds, kind, request index)


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
    # waiting allocations: strictly in line (fifo), any that fits goes first (fit), or in line
    # keeping decode headroom free (reserve:N: N tokens for every request holding pages and for
    # the one admitted, as SGLang's prealloc queue keeps --num-reserved-decode-tokens;
    # reserve-held:N: for the requests holding pages only)
    policy: str = "fifo"
    ops: list[tuple[int, int, int]] = field(init=False)  # (t, kind, request index)
    groups: list[tuple[int, int]] = field(init=False)  # [start, end) of ambiguous groups
    _headroom: tuple[int, int] = field(init=False)  # reserve:N tokens, and per one more request

    @property
    def strict(self) -> bool:
        """Whether waiting allocations keep their line (only `fit` lets one pass)."""
        return self.policy != "fit"

    def headroom(self, holders: int) -> int:
        """The slots the line leaves free when holders requests hold pages."""
        tokens, more = self._headroom
        return tokens * (holders + more) if tokens else 0

    def __post_init__(self) -> None:
        self.ops = sorted(self._ops(), key=lambda o: (o[0], o[1], self.reqs[o[2]].request_id))
        line, _, tokens = self.policy.partition(":")  # reserve:N, reserve-held:N
        self._headroom = (int(tokens), int(line == "reserve")) if tokens else (0, 0)

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
        requests: the timestamps do not order them. Decode-page operations sit at modelled
        times (one per page a step reaches: with one-token pages, one per token), so they do
        not chain logged operations: a logged operation further than skew_us from the previous
        logged one starts a run of its own, whatever decode pages fall between."""
        self.groups = []
        start = 0
        logged = self.ops[0][0] if self.ops else 0  # the last logged operation's time
        for k in range(1, len(self.ops) + 1):
            cut = k == len(self.ops) or self.ops[k][0] - self.ops[k - 1][0] >= skew_us
            if k < len(self.ops) and self.ops[k][1] != PAGE:
                cut = cut or self.ops[k][0] - logged >= skew_us
                logged = self.ops[k][0]
            if cut:
                if len({o[2] for o in self.ops[start:k]}) > 1:
                    self.groups.append((start, k))
                start = k


def fixed(part: list[Op]) -> list[set[int]]:
    """Per position in the group, the positions that must come before it: each request's own
    operations keep their order (nothing else is fixed: the decode pages' times are spread by
    the model, not logged, so even one step's pages may fall in any order here)."""
    before: list[set[int]] = [set() for _ in part]
    last: dict[int, int] = {}
    for j, (_, _, i) in enumerate(part):
        if i in last:
            before[j].add(last[i])
        last[i] = j
    return before


def interleavings(part: list[Op], before: list[set[int]]) -> Iterator[list[Op]]:
    """Every order of the group that keeps the fixed orders (`fixed`), the logged order
    first."""
    placed = [False] * len(part)
    order: list[Op] = []

    def walk() -> Iterator[list[Op]]:
        if len(order) == len(part):
            yield list(order)
            return
        for j, op in enumerate(part):
            if not placed[j] and all(placed[k] for k in before[j]):
                placed[j] = True
                order.append(op)
                yield from walk()
                order.pop()
                placed[j] = False

    yield from walk()


Event = tuple[int, str, str, int, int, int, str | None]  # ts, request, op, slot, count, pos, src
Layout = tuple[tuple[int, int] | None, ...]  # per reader position: (writer index, its position)


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
