"""Runs of a vLLM unified node's engine scheduler on the clock (unified.py): where no placement
of the unlogged steps fits the log (a request held back by the seats or the token budget, a
prompt chunked beside others), each request arrives at its logged arrival time and the
scheduler alone decides when it runs, as the engine did. An arrival between logged steps may
have joined the step under way or not; the runs follow both, depth first.

Runs that can only repeat others are not made. Where an arrival joined a step by such a
decision and the scheduler did not take it into that step (the seats or the token budget were
spent on requests ahead of it, first come first served), the step ran as it would have without
it; if the same prompt is what it would arrive with a step later and joining then is open,
the run is the one in which it arrived a step later, which the other side of the decision
makes. Such a run stops there (`same`), and its later decisions are not followed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from forensics.engines.client import EngineAllocators
from forensics.reconstruct.runstate import RunState, StepClock, UnifiedRun, logged_at
from forensics.reconstruct.unified import UnifiedNode


@dataclass
class _Held:
    """An arrival that joined a step by a decision and was not scheduled in it."""

    i: int
    tokens: list[int]


def run_timed(  # noqa: PLR0913
    node: UnifiedNode,
    drv: EngineAllocators,
    stub_shared: bool,
    events: bool,
    choices: list[bool],
    prune: bool = True,
) -> UnifiedRun:
    """One run of the engine's scheduler on the clock: each request arrives at its logged
    arrival time and the scheduler alone decides when it runs (seats, token budget, chunked
    prefill), as the engine did. A step that gives first tokens or completions must be the
    next logged step, with exactly the requests the log has there, and sets the clock to its
    logged time; a step that gives none is taken to last one typical step (StepClock), never
    reaching the next logged step's time. An engine with nothing to do waits for the next
    arrival.

    A request that arrived before the last logged step's time (or the arrival the engine
    waited for) joins the next step. One that arrived after it but before the next logged
    step's time may have joined the next step (a gateway that adds requests between steps
    logs arrivals in the gaps, and the clock of unlogged steps is only an estimate, so also
    where it arrived before that estimate) or not: it joins where it arrived within a typical
    step of the clock, else not, unless choices[k] is True for this, the k-th such decision,
    which turns that around. The run's `branches` counts the decisions it made. With `prune`,
    a run that repeats another (the module's note) stops with `same` set."""
    assert node.spans is not None
    reqs, clusters, spans_ = node.reqs, node.clusters, node.spans
    pool = drv.new_pool("vllm-sched", node.n_blocks, node.ps, False, *node.limits.config())
    state = RunState(reqs, node.ps, node.n_blocks, events)
    order = sorted(range(len(reqs)), key=lambda i: (reqs[i].received_us, i))
    step_us = StepClock(reqs)
    clock, logged, came, decided = reqs[order[0]].received_us, 0, 0, 0
    known = clock  # the clock as the log fixes it: unlogged steps' times are estimates
    budget = node.limits.config()[1]
    most = len(clusters) + sum(r.n_out + r.prompt // budget + 1 for r in reqs) + 8
    held: _Held | None = None
    for _ in range(most):
        near = clock + step_us.around(clock)
        far = max(near, clusters[logged] if logged < len(clusters) else near)
        if held and reqs[held.i].received_us <= far:
            if node.prompt(drv, pool, held.i, stub_shared) == held.tokens:
                return UnifiedRun(ok=False, branches=decided, same=True)
        joined: _Held | None = None
        while came < len(order) and reqs[order[came]].received_us <= far:
            at = reqs[order[came]].received_us
            by_choice = at > known  # it may have come before the next step began, or not
            if by_choice:
                flipped = decided < len(choices) and choices[decided]
                decided += 1
                if (at <= near) == flipped:
                    break  # it, and every later arrival, joins a later step
            tokens = node.arrive(drv, pool, order[came], stub_shared)
            joined = _Held(order[came], tokens) if by_choice else None
            came += 1
        if came == len(state.done) and came < len(order):
            clock = known = reqs[order[came]].received_us  # idle until the next arrival
            held = None
            continue
        (step,) = drv.steps(pool, 1)
        scheduled = {rid for rid, *_ in step["new"]}
        held = joined if prune and joined and f"r{joined.i}" not in scheduled else None
        if step["first"] or step["done"]:
            if logged == len(clusters):
                return UnifiedRun(
                    ok=False, why="the scheduler ran past the last logged step", branches=decided
                )
            why = state.step(step, logged_at(logged, spans_))
            clock = known = clusters[logged]
            logged += 1
        else:
            why = state.step(step, logged_at(-1, spans_))  # asks nothing: no outputs
            later = clock + step_us.around(clock)
            ahead = clusters[logged] - 1 if logged < len(clusters) else later
            clock = min(later, max(ahead, clock))
        if why:
            return UnifiedRun(ok=False, why=why, branches=decided)
        if len(state.done) == len(reqs):
            state.out.branches = decided
            return state.out
    return UnifiedRun(ok=False, why="the scheduler did not finish every request", branches=decided)


def timed_runs(  # noqa: PLR0913
    node: UnifiedNode,
    drv: EngineAllocators,
    stub_shared: bool,
    first: Callable[[], bool],
    tries: int,
    prune: bool = True,
) -> Iterator[UnifiedRun]:
    """Runs on the clock (run_timed), depth first over the arrivals it must decide: each next
    run turns around the latest decision not turned yet (and keeps the ones before it); at most
    `tries` runs made (a run that stops as the repeat of another counts too), and where
    decisions are left after them, a last UnifiedRun with `cut` set that says so (the runs made
    are then a sample, which clears nothing). first(): whether no run is kept yet (that run
    records events)."""
    choices: list[bool] = []
    for _ in range(tries):
        run = run_timed(node, drv, stub_shared, first(), choices, prune)
        yield run
        seq = (choices + [False] * run.branches)[: run.branches]
        while seq and seq[-1]:
            seq.pop()
        if not seq:
            return
        seq[-1] = True
        choices = seq
    yield UnifiedRun(ok=False, why=f"more than {tries} runs on the clock", cut=True)
