"""Runs over the first-token steps a jittered log allows (forensics/reconstruct/explore.py),
on vLLM's own scheduler in the engines' environment. Assignments are grouped by what reaches
the scheduler up to the stub's first read and one of each group is run: the union of the
stub's exposures must be the one a naive search finds by running every assignment alone; a
node with more groups than it may run is left unexplored and clears nobody. Logs from an
independent model of a gateway in front of an engine (tests/support/jitter_log.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.engines import engines_python
from support.jitter_log import log

from forensics.engines.client import EngineAllocators
from forensics.reconstruct import explore as E
from forensics.reconstruct import jitter as J
from forensics.reconstruct.jitter import assignments, least_jitter, network
from forensics.reconstruct.runstate import Limits
from forensics.reconstruct.trace import Req
from forensics.reconstruct.unified import ARRIVE, BLOCK, FINISH, UnifiedNode

PS, BLOCKS = 4, 10  # a small pool, so that blocks are handed out again
DELAY_US = 2_500  # the most the log model delays an output
WIDE_US = 2_000  # jitter stated beyond the least that fits: more steps fit, more runs to group


@pytest.fixture(scope="module")
def drv() -> Iterator[EngineAllocators]:
    with EngineAllocators(engines_python()) as d:
        yield d


def _node(seed: int, limits: Limits | None = None, stated: bool = True) -> UnifiedNode:
    """Eight requests of three accounts, prompts of 5 to 12 tokens and nothing cached; the
    sixth by first token is a stub. Stated: a delivery jitter WIDE_US over the least that
    fits (the prompts are made up after the log, so the log model's own steps need not be
    a run of the scheduler: the grouping, not the truth, is under test here)."""
    logged, _ = log(seed, 8, DELAY_US)
    order = sorted(range(len(logged)), key=lambda i: logged[i].first_token_us)
    reqs = [
        Req(r.request_id, f"acct-{i % 3}", r.received_us, r.first_token_us, r.completed_us,
            5 + (7 * i) % 8, r.n_out, i == order[5], None if i == order[5] else 0)
        for i, r in enumerate(logged)
    ]  # fmt: skip
    least = least_jitter(reqs, E.MOST_JITTER_US)
    assert least is not None
    return UnifiedNode("vllm-0", reqs, PS, BLOCKS, 0, limits, least + WIDE_US if stated else None)


def _naive(node: UnifiedNode, drv: EngineAllocators) -> tuple[int, set[tuple[int, int]]]:
    """Every assignment run alone, as far as the stub's first read: (runs kept, exposures)."""
    assert node.jitter_us is not None
    d = network(node.reqs, node.jitter_us)
    assert d is not None
    stub = next(i for i, r in enumerate(node.reqs) if r.stub)
    kept, found = 0, set()
    for first in assignments(node.reqs, d):
        for shared in (True, False):
            run = node.run_assigned(drv, first, shared, False, first[stub])
            kept += run.ok
            found |= set(run.exposures) if run.ok else set()
    return kept, found


@pytest.mark.parametrize("seed", [3, 5, 12, 13])
def test_grouped_runs_find_what_every_assignment_run_alone_finds(
    seed: int, drv: EngineAllocators
) -> None:
    node = _node(seed)
    res = E.UnifiedResult()
    E._jittered(res, node, drv, (True, False))
    kept, naive = _naive(node, drv)
    assert kept and naive, "the case must give the stub something to read"
    assert res.kept and set(res.exposures) == naive, (res.note, res.why)
    assert "distinct up to the stubs' first reads" in res.note


def test_more_groups_than_may_be_run_clear_nobody(
    drv: EngineAllocators, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = _node(3)
    monkeypatch.setattr(E, "MOST_GROUPS", 1)
    res = E.explore(node, drv)
    assert res.kept == 0 and not res.consistent and not res.exposures
    assert "more than 1 distinct runs" in res.why and "nothing is cleared" in res.why, res.why


def test_more_steps_to_try_than_may_be_tried_clear_nobody(
    drv: EngineAllocators, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind a stalled server the steps the times allow can be too many to enumerate: the
    node is then left unexplored and clears nobody, not cleared over the ones tried."""
    monkeypatch.setattr(E, "MOST_PLACEMENTS", 3)
    res = E.explore(_node(3), drv)
    assert res.kept == 0 and not res.consistent and not res.exposures
    assert "more first-token steps to try than 3" in res.why, res.why
    assert "nothing is cleared" in res.why, res.why


def test_a_prompt_logged_as_all_cached_still_arrives_at_its_first_token() -> None:
    """vLLM computes a prompt's last token even when all of it is cached; a log that reports
    every prompt token cached (damaged, or another engine) must not put the arrival after the
    first token."""
    r = Req("a", "acct-0", 0, 10_000, 20_000, 64, 3, False, 64)
    node = UnifiedNode("vllm-0", [r], 32, 10, 0, Limits(8, 64, True))
    assert node.arrivals([5]) == {5: [0]}
    assert node.order_key([5], 7) == ((ARRIVE, 0), (BLOCK, 0), (FINISH, 0))  # 64 fills 2 blocks


def test_a_long_exploration_says_how_far_it_is(
    drv: EngineAllocators, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's enumeration and runs can take minutes: both report as they go."""
    monkeypatch.setattr(E, "REPORT_EVERY", 2)
    monkeypatch.setattr(J, "REPORT_EVERY", 2)
    heard: list[tuple[str, int, int | None]] = []
    res = E.explore(_node(3), drv, lambda what, done, total: heard.append((what, done, total)))
    assert res.kept
    assert any(w.startswith("sets of engine steps") and n >= 2 for w, n, _ in heard), heard
    assert any(w == "runs on the engine's scheduler" and t for w, _, t in heard), heard
    tried = [(n, t) for w, n, t in heard if w == "first-token steps tried"]
    assert tried and tried[0] == (2, E.MOST_PLACEMENTS), heard  # a search with no set yet


def test_steps_that_no_seat_count_allows_are_said_and_clear_nobody(drv: EngineAllocators) -> None:
    """With one seat, overlapping requests cannot have run as logged: nothing is run."""
    node = _node(3, Limits(1, None, True))
    res = E.explore(node, drv)
    assert res.kept == 0 and not res.consistent and not res.exposures
    assert "keep within the logged seats and token budget" in res.why, res.why


def test_without_a_stated_jitter_or_below_what_the_log_needs_nobody_is_cleared(
    drv: EngineAllocators,
) -> None:
    """The least jitter that fits is a floor, not a bound: without a stated jitter nothing is
    run; a stated one below the floor contradicts the log, and nothing is run either."""
    unstated = E.explore(_node(13, stated=False), drv)
    assert unstated.runs == 0 and not unstated.consistent and not unstated.exposures
    assert "how much more the log cannot tell" in unstated.why, unstated.why
    node = _node(13)
    least = least_jitter(node.reqs, E.MOST_JITTER_US)
    assert least is not None and least > 100
    node.jitter_us = least - 100
    below = E.explore(node, drv)
    assert below.runs == 0 and not below.consistent
    assert f"more than the stated {(least - 100) / 1000:.1f} ms" in below.why, below.why
