"""A vLLM unified node's blocks rebuilt from the request log, on vLLM's own v1 scheduler.

The engine's steps come from the log's times where those mark them (steps.py: logged steps,
and every count of the steps the log does not show that gives each request as many steps as
output tokens; elsewhere from a stated delivery jitter, explore.py and jitter.py). Each
placement of those steps is run on vLLM's `Scheduler` over its `KVCacheManager`
(forensics/engines/allocator_driver.py, `vllm-sched`), with prefix caching as the engine's
banner says it ran (on where not logged but a response reports a hit; else the node is not
rebuilt: stage.py) and the scheduling limits the engine logged (max_num_seqs,
max_num_batched_tokens, chunked prefill; one not logged is left out only where vLLM's default
could not have bound, limits.py). The scheduler decides
what each step does: running requests' decode blocks, then waiting requests first come first
served within the seats and the token budget (a prompt longer than the budget chunked over
steps), then the blocks of every request that finished freed (uncached ones to the free
queue's head, cached ones to its tail, hashable until popped; with caching off, all uncached).

Per request:

- it arrives just before the step of its logged first token, earlier by the steps its prefill
  needs when chunked; the scheduler must give it its first token exactly there and finish it
  at the step of its logged completion, or the run does not fit the log. Where no such run
  fits (a request held back by the seats or the token budget, a prompt chunked beside
  others), runs on the clock follow (timed.py): each request arrives at its logged arrival
  time and the scheduler alone decides when it runs;
- the log has no contents, so prompts are synthesized: the first p blocks of every prompt of
  an account are the account's shared prefix, the rest its own. p is chosen when the request
  arrives, as the first of (the account's longest logged hit, the request's own logged hit)
  with which the real manager reproduces the request's logged `cached_tokens`;
- a stub (screening's stub reasons) is what forensics/tap/vllm_faults.py makes of a request:
  no prefix-cache lookup, all but its last prompt token taken as computed, fresh blocks for its
  whole prompt. Its first read covers positions 0 .. prompt-2 of those blocks, and their last
  writers are its exposures. Whether its own prompt shared the account's prefix (so that its
  blocks were cached under the prefix's hashes) is explored. A later request whose hit is
  served from blocks a stub was handed and never wrote reads their last writers too
  (runstate.RunState).

A run is consistent with the log when every request was scheduled, got its first token and
finished at its logged steps, without a preemption, and every request but the stubs had
exactly its logged prefix-cache hits; only consistent runs are kept (none kept: the node is
marked inconsistent and clears nothing)."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from forensics.engines.client import EngineAllocators
from forensics.reconstruct.runstate import Limits, RunState, UnifiedRun, logged_at
from forensics.reconstruct.steps import (
    doubtful,
    index_of,
    merge_gap,
    resolution,
    shows_steps,
    spans,
    step_layouts,
    steps,
)
from forensics.reconstruct.trace import Req

DECODE, AFTER = 0, 3  # a decode step at a logged step, or between it and the next one
BLOCK, ARRIVE, FINISH = 0, 1, 2  # what reaches the scheduler in a step, in its order (order_key)
STEP_LAYOUTS = 20_000  # the most placements of unlogged steps enumerated
MAX_STEPS = 5_000  # logged steps of a node explored; more: none kept
SCHEDULES = 128  # the most distinct decode-block schedules they give, run; more: none kept
MOST_DOUBTFUL = 6  # logged steps that may be one step's outputs, each both ways; more: none


def prompt_tokens(acct: int, i: int, prompt: int, shared_blocks: int, ps: int) -> list[int]:
    """A synthesized prompt: the account's shared prefix for `shared_blocks` blocks, then
    tokens of this request's own (ids no other prompt uses)."""
    n = min(shared_blocks * ps, prompt)
    return [(acct + 1) * 1_000_000 + p for p in range(n)] + [
        (1 << 32) + i * 100_000 + p for p in range(n, prompt)
    ]


class UnifiedNode:
    """The runs of one node, each on a fresh vllm-sched pool (vLLM's scheduler) of one driver."""

    def __init__(  # noqa: PLR0913
        self,
        node: str,
        reqs: list[Req],
        ps: int,
        n_blocks: int,
        merge_us: int,
        limits: Limits | None = None,
        jitter_us: int | None = None,
        merged: frozenset[int] = frozenset(),
    ):
        self.node, self.reqs, self.ps, self.n_blocks = node, reqs, ps, n_blocks
        self.merge_us = merge_us
        self.limits = limits or Limits()
        # the most one step's outputs can be logged apart, as stated (--delivery-jitter-ms);
        # None: not known, and only what the logged times show is taken as the steps
        self.jitter_us = jitter_us
        gap = merge_gap(reqs, merge_us)
        self.clusters = steps(reqs, gap)
        self.marked = jitter_us < gap if jitter_us is not None else shows_steps(reqs, gap)
        # logged steps that may be one step's outputs logged apart (steps.doubtful); this
        # node's runs take the boundaries in `merged` as one step
        self.doubtful = doubtful(reqs, self.clusters) if self.marked and not merged else []
        self.merged = merged
        self.clusters = [c for k, c in enumerate(self.clusters) if k - 1 not in merged]
        accounts = sorted({r.account_id for r in reqs})
        self.acct = [accounts.index(r.account_id) for r in reqs]
        self.longest: dict[int, int] = {}  # account -> longest logged hit, in blocks
        for i, r in enumerate(reqs):
            if not r.stub and r.cached_tokens:
                a = self.acct[i]
                self.longest[a] = max(self.longest.get(a, 0), r.cached_tokens // ps)
        received = sorted(range(len(reqs)), key=lambda i: (reqs[i].received_us, i))
        self.rank = [0] * len(reqs)  # arrival order, as arrivals() takes them
        for n, i in enumerate(received):
            self.rank[i] = n
        self.new_blocks = [  # decode steps (after the first token) that need a new block
            [q - r.prompt + 1 for q in range(-(-r.prompt // ps) * ps, r.prompt + r.n_out - 1, ps)]
            for r in reqs
        ]
        self.uncached = [_uncached(r) for r in reqs]  # tokens each prefill computes
        _, budget, chunked, _ = self.limits.config()
        self.leads = [  # steps a request arrives before its first token's: its chunks less one
            -(-u // budget) - 1 if chunked else 0 for u in self.uncached
        ]
        self.spans = spans(reqs, self.clusters)
        self.layouts = (
            step_layouts(self.spans or [], len(self.clusters), STEP_LAYOUTS)
            if len(self.clusters) <= MAX_STEPS
            else []
        )

    def schedules(self, most: int) -> list[list[int]]:
        """The step layouts (unlogged steps per gap) worth running: those that place the decode
        steps needing a new block differently ((request, decode step k) -> (logged step,
        DECODE: at it | AFTER: after it)); layouts that place them alike are run once (every
        other step only appends to a block), and no more than most + 1 of them."""
        out: list[list[int]] = []
        seen: set[tuple[tuple[tuple[int, int], tuple[int, int]], ...]] = set()
        for gaps in self.layouts:
            if len(out) > most:
                break
            index = index_of(gaps)
            where: dict[tuple[int, int], tuple[int, int]] = {}
            for i in range(len(self.reqs)):
                a = self.spans[i][0] if self.spans else 0
                for k in self.new_blocks[i]:
                    at = int(np.searchsorted(index, index[a] + k, side="right")) - 1
                    where[(i, k)] = (at, DECODE if index[at] == index[a] + k else AFTER)
            key = tuple(sorted(where.items()))
            if key not in seen:
                seen.add(key)
                out.append(gaps)
        return out

    def merged_variants(self) -> list[UnifiedNode]:
        """The node with each nonempty set of its doubtful boundaries taken as one step: the
        runs of every one that fits the log are kept beside this one's (none, past
        MOST_DOUBTFUL boundaries: unstepped says so)."""
        if self.merged or len(self.doubtful) > MOST_DOUBTFUL:
            return []
        return [
            UnifiedNode(
                self.node,
                self.reqs,
                self.ps,
                self.n_blocks,
                self.merge_us,
                self.limits,
                self.jitter_us,
                frozenset(ks),
            )
            for n in range(1, len(self.doubtful) + 1)
            for ks in combinations(self.doubtful, n)
        ]

    def missing(self) -> str:
        """Why the log cannot be checked against the engine's scheduler at all, or ''."""
        for r in self.reqs:
            if r.first_token_us is None:
                return (
                    f"{r.request_id} has no first token in the log (a gateway that does not "
                    "stream logs none: log first_token_at)"
                )
            if r.completed_us is None:
                return f"{r.request_id} has no completion in the log"
            if r.cached_tokens is None and not r.stub:
                return f"{r.request_id} has no cached_tokens in the log"
        return ""

    def split_step(self) -> bool:
        """Whether the steps are read off the log, but a request spans more of them than it
        has output tokens where doubtful steps may be one step's outputs logged apart: taken
        as one (merged_variants), the log may fit. A preemption also spans more steps: a run
        in which the driven scheduler preempts is not kept (runstate), and a merged run that
        fits without one is a run the log allows."""
        return (
            self.marked
            and self.spans is None
            and 0 < len(self.doubtful) <= MOST_DOUBTFUL
            and len(self.clusters) <= MAX_STEPS
        )

    def unstepped(self) -> str:
        """Why the engine's steps cannot be read off the logged times, or ''."""
        if not self.marked:
            if self.jitter_us is not None:
                return "one step's outputs may be logged further apart than the logged steps"
            times = [
                t for r in self.reqs for t in (r.first_token_us, r.completed_us) if t is not None
            ]
            coarse = resolution(times) if times else 1
            return "the logged times do not mark the engine's steps" + (
                f" (they are whole multiples of {coarse / 1000:g} ms, too coarse to show one "
                "step's outputs together; where the log was written beside the engine, with "
                f"no server between, --delivery-jitter-ms {coarse / 1000:g} states that rounding)"
                if coarse >= 1000
                else ""
            )
        if len(self.clusters) > MAX_STEPS:
            return f"{len(self.clusters)} logged steps, more than {MAX_STEPS} are not explored"
        if len(self.doubtful) > MOST_DOUBTFUL:
            return (
                f"{len(self.doubtful)} logged steps closer to the one before than a "
                "third of a token's time, each maybe one step's outputs logged apart (a loaded "
                "machine); "
                f"more than {MOST_DOUBTFUL} are not explored"
            )
        if self.spans is None:
            return (  # the log cannot tell a preemption from one step's outputs spread apart
                "a request spans more logged steps than it has output tokens (a preemption, or "
                "spread outputs; --delivery-jitter-ms rebuilds it under a stated bound)"
            )
        return ""

    def unplaced(self) -> str:
        """Why the unlogged steps cannot be placed between the logged ones, or ''."""
        if not self.layouts:
            return "no count of unlogged steps gives every request its output tokens"
        if len(self.layouts) > STEP_LAYOUTS:
            return f"more than {STEP_LAYOUTS} ways to place the unlogged steps"
        return ""

    def arrivals(self, first: list[int]) -> dict[int, list[int]]:
        """Engine step -> the requests that arrive just before it, in arrival order: the step
        of its first token (first[i]), earlier by the steps a chunked prefill of its uncached
        prompt takes under the token budget (the scheduler must then give it its first token
        exactly there). Such earlier steps that no logged output shows are taken to be the
        logged steps before it; before the first one, steps are added at the start."""
        out: dict[int, list[int]] = {}
        for i in sorted(range(len(self.reqs)), key=lambda i: (self.reqs[i].received_us, i)):
            out.setdefault(first[i] - self.leads[i], []).append(i)
        return out

    def run(
        self, drv: EngineAllocators, gaps: list[int], stub_shared: bool, events: bool
    ) -> UnifiedRun:
        """One run of the engine's scheduler over the steps of this layout."""
        assert self.spans is not None
        index = index_of(gaps)
        return self.run_assigned(drv, [index[a] for a, _, _ in self.spans], stub_shared, events)

    def order_key(self, first: list[int], until: int) -> tuple[object, ...] | None:
        """What a run over these first-token steps (run_assigned) does up to engine step
        `until`, as a key: two assignments with the same key run alike that far. What reaches
        the scheduler in a step is, in its order: running requests' decode steps that need a
        new block, arrivals (in arrival order), and after the step the frees of the requests
        that finished. Without chunked prefill every request in flight is scheduled in every
        step, so an assignment with more of them in some step up to `until` than the seats, or
        more tokens than the budget, cannot be the engine's (None); in any other, neither
        limit binds there, the blocks depend on that sequence alone, not on the steps it falls
        in, and the key is the sequence. With chunked prefills the key keeps each step's
        share."""
        seats, budget, *_ = self.limits.config()
        at: dict[int, list[tuple[int, int]]] = {}
        starts, ends = [], []
        for i, r in enumerate(self.reqs):
            arrive, last = first[i] - self.leads[i], first[i] + max(r.n_out, 1) - 1
            marks = [(arrive, (ARRIVE, self.rank[i])), (last, (FINISH, i))]
            marks += [(first[i] + k, (BLOCK, i)) for k in self.new_blocks[i]]
            for step, what in marks:
                if step <= until:
                    at.setdefault(step, []).append(what)
            starts.append(arrive)
            ends.append(last)
        if any(self.leads):  # chunked prefills
            return tuple((step, tuple(sorted(at[step]))) for step in sorted(at))
        if (seats < 1 << 20 or budget < 1 << 30) and _over(
            starts, ends, self.uncached, (seats, budget), until
        ):
            return None
        return tuple(what for step in sorted(at) for what in sorted(at[step]))

    def run_assigned(  # noqa: PLR0913
        self,
        drv: EngineAllocators,
        first: list[int],
        stub_shared: bool,
        events: bool,
        until: int | None = None,
    ) -> UnifiedRun:
        """One run of the engine's scheduler in which request i gets its first token at engine
        step first[i] and finishes n_out - 1 steps later, as it must without a preemption;
        with `until`, only as far as that step (what the log says of later steps unchecked)."""
        early = self.arrivals(first)
        lead = max(0, -min(early, default=0))  # steps added before the first logged one
        arrive = {at + lead: group for at, group in early.items()}
        span = [
            (f + lead, f + lead + max(r.n_out, 1) - 1, 0)
            for f, r in zip(first, self.reqs, strict=True)
        ]
        pool = drv.new_pool("vllm-sched", self.n_blocks, self.ps, False, *self.limits.config())
        state = RunState(self.reqs, self.ps, self.n_blocks, events)
        total = max((b for _, b, _ in span), default=-1) + 1
        if until is not None:
            total = min(total, until + lead + 1)
        starts = sorted(a for a in arrive if a < total)
        for n, at in enumerate([*starts, total]):
            if n:
                begin = starts[n - 1]
                for k, step in enumerate(drv.steps(pool, at - begin)):
                    why = state.step(step, logged_at(begin + k, span))
                    if why:
                        return UnifiedRun(ok=False, why=why)
            if at < total:
                for i in arrive[at]:
                    self.arrive(drv, pool, i, stub_shared)
        left = [self.reqs[i].request_id for i in range(len(self.reqs)) if i not in state.done]
        if left and until is None:
            return UnifiedRun(ok=False, why=f"{left[0]} did not finish in the steps the log allows")
        return state.out

    def prompt(self, drv: EngineAllocators, pool: int, i: int, stub_shared: bool) -> list[int]:
        """The prompt request i arrives with now: for a stub, shared with its account's prefix
        or not (both are explored); otherwise the first sharing that gives its logged
        prefix-cache hits at this moment."""
        r, ps = self.reqs[i], self.ps
        full = min(self.longest.get(self.acct[i], 0), r.prompt // ps)
        if r.stub:
            return prompt_tokens(self.acct[i], i, r.prompt, full if stub_shared else 0, ps)
        want = (r.cached_tokens or 0) // ps
        tried = []
        for shared in dict.fromkeys((full, want)):
            tokens = prompt_tokens(self.acct[i], i, r.prompt, shared, ps)
            tried.append(tokens)
            if drv.peek(pool, tokens) == r.cached_tokens:
                return tokens
        return tried[0]

    def arrive(self, drv: EngineAllocators, pool: int, i: int, stub_shared: bool) -> list[int]:
        """Request i arrives (waiting) with the prompt it has now (prompt); that prompt."""
        tokens = self.prompt(drv, pool, i, stub_shared)
        drv.add(pool, f"r{i}", self.reqs[i].stub, max(self.reqs[i].n_out, 1), tokens)
        return tokens


def _over(
    starts: list[int], ends: list[int], tokens: list[int], limits: tuple[int, int], until: int
) -> bool:
    """Whether some step up to `until` has more requests in flight than seats, or schedules
    more tokens than the budget (arrivals' uncached prompts and one per decoding request)."""
    seats, budget = limits
    lo = min(starts)
    size = max(ends) - lo + 2
    flight = np.zeros(size, np.int64)
    load = np.zeros(size, np.int64)
    for a, b, t in zip(starts, ends, tokens, strict=True):
        flight[a - lo] += 1
        flight[b - lo + 1] -= 1
        load[a - lo] += t - 1  # its first step's tokens, counted with the decoding ones below
    in_flight, upto = np.cumsum(flight), max(until - lo + 1, 0)
    return bool((in_flight[:upto] > seats).any() or ((load + in_flight)[:upto] > budget).any())


def _uncached(r: Req) -> int:
    """The prompt tokens a request's prefill computes: all but its logged hits, at least one
    (vLLM computes a prompt's last token even when all of it is cached; a stub computes one)."""
    return 1 if r.stub else max(1, r.prompt - (r.cached_tokens or 0))
