"""The engine steps a gateway's times allow when each output is logged after its step with a
delay of its own (forensics/reconstruct/jitter.py), against an independent model of such a log:
requests of n_out tokens, one per engine step from their first token, the engine's steps at
random times, each output logged a random delay (up to `delay_us`) after its step. The oracle
for which first-token steps fit is the rule itself, checked pair by pair: two outputs logged
more than the jitter apart come from different steps, the earlier first; and for small cases
every assignment is enumerated naively."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.jitter_log import log as _log

from forensics.reconstruct.jitter import (
    TooMany,
    assignments,
    first_token_order,
    least_jitter,
    network,
)


def _fits(reqs: list[SimpleNamespace], first: list[int], jitter_us: int) -> bool:
    """The rules, pair by pair: outputs logged more than the jitter apart are in that order;
    an output logged before a request was received is from a step before its first."""
    outputs = [
        (t, f + k)
        for r, f in zip(reqs, first, strict=True)
        for t, k in ((r.first_token_us, 0), (r.completed_us, r.n_out - 1))
    ]
    ordered = all(sb > sa for ta, sa in outputs for tb, sb in outputs if tb - ta > jitter_us)
    return ordered and all(
        f > s for r, f in zip(reqs, first, strict=True) for t, s in outputs if t < r.received_us
    )


def _shift(first: list[int]) -> tuple[int, ...]:
    low = min(first)
    return tuple(f - low for f in first)


@pytest.mark.parametrize("seed", range(8))
def test_the_true_steps_fit_and_every_assignment_keeps_the_rule(seed: int) -> None:
    reqs, true = _log(seed, 12, 3_000)
    least = least_jitter(reqs, 1_000_000)
    assert least is not None and least <= 3_000 + 50  # the true steps fit with the true delay
    d = network(reqs, 3_000)
    assert d is not None
    n = len(reqs)
    assert all(true[v] - true[u] <= d[u, v] for u in range(n) for v in range(n))
    drawn = list(itertools.islice(assignments(reqs, d), 300))
    assert len({tuple(f) for f in drawn}) == len(drawn) and min(drawn[0]) == 0
    assert all(_fits(reqs, f, 3_000) for f in drawn)
    if least > 100:  # with less jitter than the least, no steps fit
        assert network(reqs, least - 100) is None


def _naive(reqs: list[SimpleNamespace], jitter_us: int, reach: int) -> set[tuple[int, ...]]:
    """Every assignment with the first request at step 0 and the others within reach of it
    that keeps the rule, by depth-first search checking each new request against the ones
    already placed; shifted to start at step 0."""
    out: set[tuple[int, ...]] = set()

    def place(first: list[int]) -> None:
        if len(first) == len(reqs):
            out.add(_shift(first))
            return
        for f in range(-reach, reach + 1):
            if _fits(reqs[: len(first) + 1], [*first, f], jitter_us):
                place([*first, f])

    place([0])
    return out


@pytest.mark.parametrize("seed", range(6))
def test_when_were_requests_received_bounds_their_steps_beyond_the_jitter(seed: int) -> None:
    """A stalled gateway (outputs logged up to 40 ms late) leaves steps wide open by the
    jitter alone; an output logged before a request was received still comes from a step
    before its first one, whatever the jitter."""
    reqs, true = _log(200 + seed, 10, 40_000, sent_us=300)
    d = network(reqs, 40_000)
    assert d is not None
    n = len(reqs)
    assert all(true[v] - true[u] <= d[u, v] for u in range(n) for v in range(n))
    drawn = list(itertools.islice(assignments(reqs, d), 300))
    assert drawn and all(_fits(reqs, f, 40_000) for f in drawn)


def _busy(
    first: list[int] | tuple[int, ...], reqs: list[SimpleNamespace], lead: list[int] | None = None
) -> bool:
    """Whether every step from the first arrival to the last output has a request in flight
    (from lead steps before its first token): an engine with nothing to do runs no step, so
    its own steps are always such a set."""
    starts = [f - ahead for f, ahead in zip(first, lead or [0] * len(reqs), strict=True)]
    ends = [f + r.n_out - 1 for f, r in zip(first, reqs, strict=True)]
    return all(
        any(f <= s <= e for f, e in zip(starts, ends, strict=True))
        for s in range(min(starts), max(ends) + 1)
    )


def _packed(first: list[int], reqs: list[SimpleNamespace]) -> tuple[int, ...]:
    """The steps with the idle ones between them dropped (how the engine numbers its own
    steps), shifted to start at 0."""
    busy = sorted({s for f, r in zip(first, reqs, strict=True) for s in range(f, f + r.n_out)})
    return tuple(busy.index(f) for f in first)


@pytest.mark.parametrize("seed", range(6))
def test_small_logs_give_every_assignment_that_fits(seed: int) -> None:
    """Enumerated naively against what assignments gives: the same set, each once: every
    assignment that keeps the rule and leaves no step idle, including those of a request
    after an idle engine or one nothing logged bounds from above."""
    reqs, _ = _log(100 + seed, 5, 4_000)
    jitter = 4_000
    d = network(reqs, jitter)
    assert d is not None
    given = [tuple(f) for f in assignments(reqs, d)]
    assert len(given) == len(set(given))
    naive = {f for f in _naive(reqs, jitter, 45) if _busy(f, reqs)}
    assert naive and set(given) == naive


@pytest.mark.parametrize("seed", range(6))
def test_chunked_prefills_fill_the_steps_before_their_first_token(seed: int) -> None:
    """A request whose prompt is prefilled in chunks is in flight from the step it arrives,
    lead steps before its first token: those steps are not idle, and the assignments are
    every one that fits and leaves no step idle counting them."""
    jitter = 40_000 if seed % 2 else 6_000
    reqs, _ = _log(500 + seed, 4, jitter)
    lead = [(7 * i + seed) % 3 for i in range(len(reqs))]
    d = network(reqs, jitter)
    assert d is not None
    given = [tuple(f) for f in assignments(reqs, d, lead=lead)]
    assert len(given) == len(set(given))
    reach = sum(r.n_out + ahead for r, ahead in zip(reqs, lead, strict=True))
    naive = {f for f in _naive(reqs, jitter, reach) if _busy(f, reqs, lead)}
    assert naive and set(given) == naive


@pytest.mark.parametrize("seed", range(5))
def test_a_stalled_gateway_leaves_many_requests_unbounded_and_every_one_is_followed(
    seed: int,
) -> None:
    """Outputs logged up to 80 ms late behind steps 2 to 9 ms apart: requests are bounded
    by nothing logged before them on one side, and the assignments are still every one that
    fits and leaves no step idle, the engine's own steps among them (a request taken at its
    earliest step alone missed the engine's run)."""
    reqs, true = _log(400 + seed, 4, 80_000)
    d = network(reqs, 80_000)
    assert d is not None
    given = [tuple(f) for f in assignments(reqs, d)]
    assert len(given) == len(set(given)) and _packed(true, reqs) in set(given)
    reach = sum(r.n_out for r in reqs)  # no step idle: all within the steps they make
    assert set(given) == {f for f in _naive(reqs, 80_000, reach) if _busy(f, reqs)}


@pytest.mark.parametrize("seed", range(6))
def test_past_the_stubs_the_rest_is_taken_once_without_losing_a_placement(seed: int) -> None:
    """With `until`, the requests after it that can only start after the steps taken are taken
    at their earliest: every placement of what falls up to the last step of the requests up
    to it (theirs, and any later request's that can come that early) is still given."""
    reqs, _ = _log(300 + seed, 9, 3_000)
    d = network(reqs, 3_000)
    assert d is not None
    order = first_token_order(reqs)
    until = 4

    def seen(first: list[int]) -> tuple[int, ...]:
        """Each request's step relative to the first, up to the last step of the requests up
        to `until`; later ones as one step past it."""
        rel = [first[v] - first[order[0]] for v in order]
        last = max(rel[: until + 1])
        return tuple(min(x, last + 1) for x in rel)

    every = {seen(f) for f in assignments(reqs, d)}
    pruned = [tuple(f) for f in assignments(reqs, d, until, [0] * len(reqs))]
    assert len(set(pruned)) == len(pruned)
    assert {seen(list(f)) for f in pruned} == every


def test_a_request_that_can_come_as_early_is_not_taken_at_its_earliest_only() -> None:
    """Three requests whose first tokens are logged within the jitter of each other: any of
    them may have come first, so past the first one none is fixed."""
    reqs = [
        SimpleNamespace(request_id=f"r{i}", n_out=3, received_us=0,
                        first_token_us=10_000 + 500 * i, completed_us=30_000 + 500 * i)
        for i in range(3)
    ]  # fmt: skip
    d = network(reqs, 2_000)
    assert d is not None
    every = {tuple(f) for f in assignments(reqs, d)}
    assert {tuple(f) for f in assignments(reqs, d, 0, [0, 0, 0])} == every
    assert len(every) > 1


def _recorded(name: str) -> tuple[list[SimpleNamespace], list[int]]:
    """A real vLLM's requests behind its server and the engine's own first-token steps
    (tests/data/steps)."""
    path = Path(__file__).parents[1] / "data" / "steps" / f"{name}.json"
    rows = json.loads(path.read_text(encoding="utf-8"))["requests"]
    steps = [r.pop("step") for r in rows]
    return [SimpleNamespace(**r) for r in rows], steps


def _needed(reqs: list[SimpleNamespace], steps: list[int]) -> int:
    """The jitter the engine's steps need: the widest logged gap from an output to one of
    the same step or an earlier one."""
    outs = [
        (t, s + k)
        for r, s in zip(reqs, steps, strict=True)
        for t, k in ((r.first_token_us, 0), (r.completed_us, r.n_out - 1))
    ]
    return max(ta - tb for ta, sa in outs for tb, sb in outs if sb >= sa)


@pytest.mark.parametrize("name", ["server-quiet", "server-stalled"])
def test_a_real_engines_steps_are_enumerated_or_too_many_is_said(name: str) -> None:
    """Under the jitter its own steps needed, the real engine's first-token steps are among
    the assignments, or there are more than may be tried and TooMany says so: never a
    complete-looking enumeration without them (the earlier one gave one set behind the
    stalled server, not the engine's, and its node cleared true leakers)."""
    reqs, steps = _recorded(name)
    jitter = _needed(reqs, steps)
    d = network(reqs, jitter)
    assert d is not None and _fits(reqs, steps, jitter)
    real = _packed(steps, reqs)
    assert real == tuple(s - min(steps) for s in steps)  # the engine ran no idle step
    found, complete = False, True
    try:
        for first in assignments(reqs, d, most=200_000):
            found = found or tuple(first) == real
    except TooMany:
        complete = False
    assert found or not complete, "the enumeration ended without the engine's steps"
    if name == "server-quiet":
        assert found and complete
