"""The orders of a node's operations that the timestamps leave open, followed on its pool.

The operations of a group (closer than the skew to one another: NodeTrace.find_groups) may
have reached the engine in any order that keeps each request's own operations in theirs. The
runs are followed group by group: each of the group's orders is applied to a copy of every run
followed, and copies that reach the same state (the pool's free list, the pages each request
holds, the line of waiting allocations) are merged into one (PageRun.absorb), which keeps per
slot every writer the merged runs left there. Orders that change nothing later cost nothing
more.

Every order is followed while the runs followed at once stay within MOST_RUNS (fewer for a
pool so big that their slot state would pass MOST_BYTES), a group's orders within
MOST_INTERLEAVINGS and the work within MOST_WORK whole runs' worth of operations. On a busy
node they do not for long: runs that hand two requests each other's pages stay apart while
both hold them, and such swaps multiply. From the group where the limit is hit, the stubs read
later are `sampled`: their exposures are those of the logged order, of `samples - 1` orders
that shuffle every group at random (`shuffled`) and of the order that takes every group's frees
first (`frees_first`), a union over a sample that can miss the order the engine took; the
node's note and each such request say so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from forensics.engines.pools import PagePool
from forensics.reconstruct.pagerun import PageRun, Reads, StateKey
from forensics.reconstruct.trace import FREE, GROW, NodeTrace, Op, fixed, interleavings

MOST_RUNS = 256  # distinct runs followed at once; more: the later reads are sampled
MOST_BYTES = 2 << 30  # the slot state of the runs followed at once (a big pool: fewer runs)
MOST_WORK = 64  # operations applied over all runs, in whole runs' worth; more: sampled
COPY_BYTES_PER_STEP = 65_536  # a copy counts one operation per this much slot state copied
MOST_INTERLEAVINGS = 5_040  # orders of one group (7 operations of 7 requests); more: sampled


@dataclass
class Explored:
    """What every explored order of one node found, and how far the exploration went."""

    reads: Reads = field(default_factory=Reads)
    orders: int = 0  # orders of groups applied, over all runs followed
    most: int = 1  # the most runs followed at once
    steps: int = 0  # operations applied over all runs followed, copies counted in
    sampled: set[int] = field(default_factory=set)  # stubs read after the limit was hit
    why: str = ""  # why not every order was followed ("" when every one was)


def count_orders(part: list[Op], before: list[set[int]], most: int) -> int:
    """How many orders `interleavings` gives, counted up to most + 1."""
    n = 0
    for _ in interleavings(part, before):
        n += 1
        if n > most:
            break
    return n


def explore_orders(trace: NodeTrace, new_pool: Callable[[], PagePool], samples: int) -> Explored:
    """Follow the orders of trace.ops its groups leave open, every one as far as the limits
    allow and then `samples` of them, on pools from new_pool."""
    res = Explored()
    frontier = [PageRun(trace, new_pool(), res.reads, events=False)]
    most_runs = max(1, min(MOST_RUNS, MOST_BYTES // max(frontier[0].nbytes, 1)))
    budget = MOST_WORK * len(trace.ops)
    pos, stop = 0, len(trace.ops)
    try:
        for a, b in trace.groups:
            for run in frontier:
                run.steps(trace.ops[pos:a])
            res.steps += (a - pos) * len(frontier)
            part = trace.ops[a:b]
            before = fixed(part)
            if count_orders(part, before, MOST_INTERLEAVINGS) > MOST_INTERLEAVINGS:
                res.why = f"a group of {len(part)} operations with more than "
                res.why += f"{MOST_INTERLEAVINGS:,} orders"
                pos, stop = a, a
                break
            frontier = _branch(res, frontier, part, before)
            pos = b
            if len(frontier) > most_runs:
                res.why, stop = f"more than {most_runs} distinct runs", b
                break
            if res.steps > budget:
                res.why, stop = f"more than {MOST_WORK} whole runs' worth of operations", b
                break
        if res.why:  # the logged order goes on in the first run
            for run in frontier[1:]:
                run.close()
            frontier = frontier[:1]
        for run in frontier:
            run.steps(trace.ops[pos:])
    finally:
        for run in frontier:
            run.close()
    if res.why:
        res.sampled = {i for _, kind, i in trace.ops[stop:] if kind == GROW}
        res.sampled = {i for i in res.sampled if trace.reqs[i].stub}
        _sample(res, trace, new_pool, samples)
    return res


def _sample(
    res: Explored, trace: NodeTrace, new_pool: Callable[[], PagePool], samples: int
) -> None:
    """The sampled stubs' reads over samples - 1 shuffled orders more, and the order that
    frees first in every group."""
    reads = Reads()
    orders = chain((shuffled(trace, k) for k in range(1, samples)), (frees_first(trace),))
    for order in orders:
        run = PageRun(trace, new_pool(), reads, events=False)
        try:
            run.steps(order)
        finally:
            run.close()
        res.orders += 1
    res.reads.add(reads, res.sampled)


def shuffled(trace: NodeTrace, k: int) -> list[Op]:
    """Sampled order k (k >= 1): every ambiguous group shuffled at random, each request's own
    operations kept in their order."""
    rng = np.random.default_rng([k, len(trace.ops)])
    return _regrouped(trace, lambda part: rng.random(len(part)))


def frees_first(trace: NodeTrace) -> list[Op]:
    """Every ambiguous group with its frees first, as far as each request's own operations
    allow: a stub whose first token was logged just before the frees that made room for its
    pages reads them in this order (at random its line can stay waiting in every sample, and
    its read is then not modelled at all)."""

    def keys(part: list[Op]) -> np.ndarray:  # frees, then the rest, each in the logged order
        return np.array([(op[1] != FREE) * len(part) + j for j, op in enumerate(part)], float)

    return _regrouped(trace, keys)


def _regrouped(trace: NodeTrace, keys_of: Callable[[list[Op]], np.ndarray]) -> list[Op]:
    """trace.ops with every ambiguous group sorted by keys_of(group), each request's own
    operations kept in their order (they take its keys in sorted order)."""
    ops = list(trace.ops)
    for a, b in trace.groups:
        part = ops[a:b]
        keys = keys_of(part)
        by_req: dict[int, list[int]] = {}
        for j, op in enumerate(part):
            by_req.setdefault(op[2], []).append(j)
        for idx in by_req.values():  # own operations keep their order
            for j, key in zip(idx, sorted(keys[idx]), strict=True):
                keys[j] = key
        ops[a:b] = [part[j] for j in np.argsort(keys, kind="stable")]
    return ops


def _branch(
    res: Explored,
    frontier: list[PageRun],
    part: list[Op],
    before: list[set[int]],
) -> list[PageRun]:
    """Every run followed, in every order of the group; runs that reach one state merged."""
    merged: dict[StateKey, PageRun] = {}
    for run in frontier:
        for order in interleavings(part, before):
            copy = run.copy()
            copy.steps(order)
            res.orders += 1
            res.steps += len(order) + 1 + copy.nbytes // COPY_BYTES_PER_STEP
            key = copy.key()
            if key in merged:
                merged[key].absorb(copy)
            else:
                merged[key] = copy
        run.close()
    res.most = max(res.most, len(merged))
    return list(merged.values())
