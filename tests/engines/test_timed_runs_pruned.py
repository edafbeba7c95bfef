"""Runs on the clock (forensics/reconstruct/timed.py) under scheduling limits that bind: the runs
that stop as repeats of others (an arrival that joined a step the scheduler did not take it
into) lose nothing. The oracle is the same depth-first search with nothing stopped, every
decision followed both ways: on logs served by vLLM's own scheduler (the driver's
`vllm-sched`, seats and token budget binding, prompts sharing their account's prefix), both
give the same set of fitting runs, exposures, stub layouts and hits. Needs the engines'
environment (support.engines)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from support.engines import engines_python
from support.traces import MS

from forensics.engines.client import EngineAllocators
from forensics.reconstruct.runstate import Limits, UnifiedRun
from forensics.reconstruct.timed import timed_runs
from forensics.reconstruct.trace import Req
from forensics.reconstruct.unified import UnifiedNode, prompt_tokens

BS = 4
BLOCKS = 16
TRIES = 20_000  # more than any case below needs unpruned (a cut case fails the test)


@pytest.fixture(scope="module")
def drv() -> Iterator[EngineAllocators]:
    with EngineAllocators(engines_python()) as d:
        yield d


def served(drv: EngineAllocators, rng: random.Random, seats: int, budget: int) -> list[Req]:
    """A log served by vLLM's scheduler: 5 requests of 2 accounts arriving at random
    microseconds within 6 ms, one of them a stub, an engine step every millisecond (a request
    that arrived by a step's start joins it); every prompt shares its account's 1-block
    prefix; first tokens and completions logged 5 µs after their step."""
    n = 5
    stub = rng.randrange(n)
    arrive = sorted(rng.sample(range(1, 6 * MS), n))
    reqs = [
        Req(
            f"q{i}",
            f"acct-{rng.randrange(2)}",
            arrive[i],
            None,
            None,
            rng.randint(5, 10),
            rng.randint(1, 4),
            i == stub,
        )
        for i in range(n)
    ]
    accounts = sorted({r.account_id for r in reqs})
    pool = drv.new_pool("vllm-sched", BLOCKS, BS, False, seats, budget, 1)
    first: dict[int, int] = {}
    done: dict[int, int] = {}
    hits: dict[int, int] = {}
    came, t = 0, 0
    while len(done) < n:
        t += MS
        while came < n and arrive[came] <= t:
            r = reqs[came]
            tokens = prompt_tokens(accounts.index(r.account_id), came, r.prompt, 1, BS)
            drv.add(pool, f"r{came}", r.stub, r.n_out, tokens)
            came += 1
        (step,) = drv.steps(pool, 1)
        assert not step["preempted"], "the pool is large enough that nobody is preempted"
        for rid, computed, _ in step["new"]:
            hits[int(rid[1:])] = 0 if reqs[int(rid[1:])].stub else int(computed)
        for rid in step["first"]:
            first[int(rid[1:])] = t + 5
        for rid in step["done"]:
            done[int(rid[1:])] = t + 5
    return [
        Req(
            r.request_id,
            r.account_id,
            r.received_us,
            first[i],
            done[i],
            r.prompt,
            r.n_out,
            r.stub,
            hits[i],
        )
        for i, r in enumerate(reqs)
    ]


def outcomes(runs: list[UnifiedRun]) -> set[tuple[object, ...]]:
    return {
        (
            tuple(sorted(r.exposures.items())),
            tuple(sorted(r.layouts.items())),
            tuple(sorted(r.hits.items())),
        )
        for r in runs
        if r.ok
    }


def test_runs_stopped_as_repeats_lose_no_fitting_run(drv: EngineAllocators) -> None:
    rng = random.Random(20261205)
    fitted = stopped = made = naive_made = 0
    for _ in range(24):
        seats, budget = rng.choice([(2, 64), (2, 8), (3, 6), (1, 64)])
        reqs = served(drv, rng, seats, budget)
        node = UnifiedNode("n", reqs, BS, BLOCKS, 1 * MS, Limits(seats, budget), jitter_us=0)
        assert node.spans is not None, "one step's outputs are logged together"
        for shared in (True, False):
            naive = list(timed_runs(node, drv, shared, lambda: False, TRIES, prune=False))
            pruned = list(timed_runs(node, drv, shared, lambda: False, TRIES))
            assert not any(r.cut for r in naive + pruned), "raise TRIES"
            assert outcomes(pruned) == outcomes(naive), (seats, budget, reqs)
            assert all(not r.same for r in naive)
            fitted += bool(outcomes(naive))
            stopped += sum(r.same for r in pruned)
            made, naive_made = made + len(pruned), naive_made + len(naive)
    # not vacuous: most cases have runs that fit, and runs were stopped as repeats
    assert fitted >= 24 and stopped > 0 and made < naive_made, (fitted, stopped, made, naive_made)
