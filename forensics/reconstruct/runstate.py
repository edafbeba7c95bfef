"""One run of a vLLM unified node on the engine's scheduler (unified.py): the blocks each
request holds, the last writer of every slot, and what the stubs read; the clock of the
engine's steps between the logged ones."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forensics.reconstruct.steps import decoding
from forensics.reconstruct.trace import Event, Layout, Req, runs

FIRST, DONE = 0, 1  # a request's logged first token, its logged completion


@dataclass
class UnifiedRun:
    ok: bool = True
    why: str = ""
    exposures: dict[tuple[int, int], int] = field(default_factory=dict)
    layouts: dict[int, Layout] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    hits: dict[int, int] = field(default_factory=dict)
    branches: int = 0  # arrivals a run on the clock had to decide (timed.run_timed)
    cut: bool = False  # not a run: the runs on the clock stopped before every one was made
    same: bool = False  # not a run: one a run on the clock repeats, made elsewhere (timed.py)


def logged_at(
    at: int, spans_: list[tuple[int, int, int]], index: list[int] | None = None
) -> Callable[[int, int], bool]:
    """Whether the log puts request i's first token (FIRST) or completion (DONE) at step at:
    an engine step when index (the engine step of each logged step) is given, else a logged
    step."""

    def check(i: int, event: int) -> bool:
        logged = spans_[i][event]
        return at == (logged if index is None else index[logged])

    return check


@dataclass(frozen=True)
class Limits:
    """The engine's scheduling limits, from its start-up log; None: not logged, not applied
    (only where vLLM's default could not have bound: limits.unlogged_limits_bound)."""

    max_num_seqs: int | None = None
    max_batched: int | None = None
    chunked: bool = True
    prefix_caching: bool | None = True  # None: not logged (stage.unified_node decides)

    def config(self) -> tuple[int, int, int, int]:
        """(seats, token budget, chunked, prefix caching) for the scheduler; a limit not logged
        is as large as vLLM allows. vLLM requires a budget of at least one token per seat (an
        engine logging more seats than its budget would not have started; a damaged log is held
        to it)."""
        assert self.prefix_caching is not None, "decided before the scheduler is made"
        batched = self.max_batched or 1 << 30
        seats = min(self.max_num_seqs or 1 << 20, batched)
        return (seats, batched, int(self.chunked), int(self.prefix_caching))

    def describe(self) -> str:
        def shown(v: int | None) -> str:
            return "not logged" if v is None else str(v)

        return (
            f"prefix caching {'on' if self.prefix_caching else 'off'}, max_num_seqs "
            f"{shown(self.max_num_seqs)}, max_num_batched_tokens {shown(self.max_batched)}, "
            f"chunked prefill {'on' if self.chunked else 'off'}"
        )


class StepClock:
    """How long an engine step takes around a time: the median, over the requests decoding
    then, of their logged time per output token after the first (where none decodes then, the
    nearest one's; 1 ms where none has two output tokens). Microseconds, at least 1."""

    def __init__(self, reqs: list[Req]):
        self.spans = decoding(reqs)
        self.overall = max(int(np.median([p for *_, p in self.spans])), 1) if self.spans else 1000

    def around(self, t: int) -> int:
        here = [p for a, b, p in self.spans if a <= t <= b]
        if not here and self.spans:  # nobody decodes at t: the nearest request that does
            here = [min(self.spans, key=lambda s: max(s[0] - t, t - s[1]))[2]]
        return max(int(np.median(here)), 1) if here else self.overall


class RunState:
    """What one run has seen so far: blocks per request, last writers per slot, exposures.

    A stub's blocks are cached under its prompt's hashes although it wrote none of its prompt
    (unwritten): a later request whose prefix-cache hit is served from one of them reads what
    the block's earlier owners left there, as the stub did. Its reads of those blocks are
    exposures too, until the block is handed out afresh and written."""

    def __init__(self, reqs: list[Req], ps: int, n_blocks: int, events: bool):
        self.reqs, self.ps, self.events = reqs, ps, events
        size = n_blocks * ps
        self.writer = np.full(size, -1, np.int64)
        self.wpos = np.full(size, -1, np.int64)
        self.blocks: dict[int, list[int]] = {}
        self.done: set[int] = set()
        self.unwritten: set[int] = set()  # blocks a stub was handed, cached but never written
        self.out = UnifiedRun()

    def step(self, step: dict[str, list[Any]], logged_at: Callable[[int, int], bool]) -> str:
        """Take one engine step's report; why it contradicts the log, or ''. logged_at(i,
        FIRST or DONE): whether the log puts request i's first token or completion here."""
        reqs, out = self.reqs, self.out
        if step["preempted"]:
            return f"the scheduler preempted {reqs[int(step['preempted'][0][1:])].request_id}"
        for rid, computed, ids in step["new"]:
            i = int(rid[1:])
            r = reqs[i]
            hits = 0 if r.stub else int(computed)
            if not r.stub and hits != r.cached_tokens:
                return f"{r.request_id}: {hits} hit tokens, the log {r.cached_tokens}"
            out.hits[i] = hits
            self.blocks[i] = list(ids)
            self._emit(r.received_us, r, "alloc", ids, 0)
            if r.stub:
                self._read(i, np.asarray(ids, np.int64))
                self._emit(r.received_us, r, "read", ids, 0, r.prompt)
                self.unwritten.update(ids)
            else:
                self._read_cached(i, list(ids[: hits // self.ps]))
                self.unwritten.difference_update(ids[hits // self.ps :])
        for rid, ids in step["grow"]:
            i = int(rid[1:])
            r = reqs[i]
            assert r.first_token_us is not None
            self.unwritten.difference_update(ids)
            self._emit(r.first_token_us, r, "alloc", ids, len(self.blocks[i]))
            self.blocks[i] += ids
        for rid in step["first"]:
            i = int(rid[1:])
            if not logged_at(i, FIRST):
                return f"the scheduler gave {reqs[i].request_id} its first token at another step"
        for rid in step["done"]:
            i = int(rid[1:])
            r = reqs[i]
            if not logged_at(i, DONE):
                return f"the scheduler finished {r.request_id} at another step than the log"
            assert r.completed_us is not None
            self._write(i, np.asarray(self.blocks[i], np.int64))
            self._emit(r.completed_us, r, "free", self.blocks[i], 0)
            self.done.add(i)
        return ""

    def _write(self, i: int, ids: np.ndarray) -> None:
        """What request i left in its blocks: the prompt it computed, its decode steps."""
        r, ps = self.reqs[i], self.ps
        p0 = r.prompt - 1 if r.stub else self.out.hits[i]
        end = min(r.prompt + max(r.n_out - 1, 0), len(ids) * ps)
        pos = np.arange(p0, end)
        slots = ids[pos // ps] * ps + pos % ps
        self.writer[slots] = i
        self.wpos[slots] = pos

    def _read(self, i: int, ids: np.ndarray) -> None:
        r, ps, out = self.reqs[i], self.ps, self.out
        pos = np.arange(0, r.prompt - 1)
        slots = ids[pos // ps] * ps + pos % ps
        w = self.writer[slots]
        out.layouts[i] = tuple(
            None if a < 0 else (int(a), int(b))
            for a, b in zip(w.tolist(), self.wpos[slots].tolist(), strict=True)
        )
        self._expose(i, w)

    def _expose(self, i: int, writers: np.ndarray) -> None:
        """Request i read slots last written by these requests (-1: nobody): the exposures."""
        mask = (writers >= 0) & (writers != i)
        for leaker, n in zip(*np.unique(writers[mask], return_counts=True), strict=True):
            self.out.exposures[(i, int(leaker))] = int(n)

    def _read_cached(self, i: int, hit: list[int]) -> None:
        """Request i's prefix-cache hit served from these blocks: those a stub left unwritten
        hold their earlier owners' data, read at every position as the stub would have."""
        ps = self.ps
        where = [b for b, block in enumerate(hit) if block in self.unwritten]
        if not where:
            return
        pos = np.concatenate([np.arange(b * ps, (b + 1) * ps) for b in where])
        self._expose(i, self.writer[np.asarray(hit, np.int64)[pos // ps] * ps + pos % ps])
        if self.events:
            r = self.reqs[i]
            for b in where:
                self.out.events.append(
                    (r.received_us, r.request_id, "read", hit[b] * ps, ps, b * ps, None)
                )

    def _emit(
        self, t: int, r: Req, op: str, ids: list[int], first: int, p1: int | None = None
    ) -> None:
        if not self.events:
            return
        ps = self.ps
        pages = np.asarray(ids, np.int64)
        for slot, n, pos in runs(pages, 0, len(ids) * ps if p1 is None else p1, ps):
            self.out.events.append((t, r.request_id, op, slot, n, pos + first * ps, None))
