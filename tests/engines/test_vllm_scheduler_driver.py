"""vLLM's v1 scheduler over its KV cache manager with prefix caching, driven over the pipe
(`vllm-sched` pools of forensics/engines/allocator_driver.py), against what vLLM v1 does with
requests and blocks (the behaviour its scheduler.py, kv_cache_manager.py and block_pool.py
document), and the unified-node reconstruction on a log whose answer follows from that
behaviour by hand. Needs the engines' environment (support.engines)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from itertools import product
from typing import Any

import pytest
from support.engines import engines_python
from support.traces import MS, req

from forensics.engines.client import EngineAllocators
from forensics.reconstruct import explore as explore_module
from forensics.reconstruct.explore import explore
from forensics.reconstruct.runstate import Limits, UnifiedRun
from forensics.reconstruct.steps import (
    merge_gap,
    resolution,
    shows_steps,
    spans,
    step_layouts,
    steps,
)
from forensics.reconstruct.trace import Req
from forensics.reconstruct.unified import UnifiedNode

BS = 4


@pytest.fixture(scope="module")
def drv() -> Iterator[EngineAllocators]:
    with EngineAllocators(engines_python()) as d:
        yield d


def pool(drv: EngineAllocators, n_blocks: int = 8, *limits: int) -> int:
    """Blocks 1 .. n_blocks-1 (block 0 is vLLM's null block), handed out in id order."""
    return drv.new_pool("vllm-sched", n_blocks, BS, False, *limits)


def serve(drv: EngineAllocators, p: int, rid: str, prompt: list[int], stub: bool = False) -> Any:
    """A request of one output token, served in one step: (computed tokens, blocks) when it
    was scheduled."""
    drv.add(p, rid, stub, 1, prompt)
    (step,) = drv.steps(p, 1)
    assert step["first"] == [rid] and step["done"] == [rid], step
    ((got, computed, blocks),) = step["new"]
    assert got == rid
    return computed, blocks


def test_a_prompt_hits_the_full_blocks_a_finished_request_left_cached(
    drv: EngineAllocators,
) -> None:
    p = pool(drv)
    assert serve(drv, p, "a", list(range(1, 11))) == (0, [1, 2, 3])
    # the two full blocks of a's prompt are cached; its third held 2 prompt tokens
    assert drv.peek(p, [*range(1, 9), 50, 51]) == 8
    hits, blocks = serve(drv, p, "b", [*range(1, 9), 50, 51])
    assert hits == 8 and blocks[:2] == [1, 2] and len(blocks) == 3
    # a prompt all of whose blocks are cached recomputes its last token: the hit stops a
    # block short (vLLM caps it at prompt - 1, in whole blocks)
    assert drv.peek(p, list(range(1, 9))) == 4


def test_freed_blocks_uncached_first_cached_last_in_reverse(drv: EngineAllocators) -> None:
    p = pool(drv)
    serve(drv, p, "a", list(range(1, 11)))  # blocks 1, 2 full (cached), 3 partial
    # uncached blocks go to the free queue's head, cached ones to its tail, tail block first
    assert serve(drv, p, "d", list(range(100, 120))) == (0, [3, 4, 5, 6, 7])
    assert serve(drv, p, "e", list(range(200, 203))) == (0, [2])  # evicts a's second block
    assert drv.peek(p, [*range(1, 5), 9, 9]) == 4
    assert drv.peek(p, [*range(1, 9), 9, 9]) == 4  # the second one is gone


def test_without_prefix_caching_nothing_hits_and_freed_blocks_are_reused_first(
    drv: EngineAllocators,
) -> None:
    """An engine started without prefix caching (the banner's enable_prefix_caching=False):
    no block is hashed, so no prompt hits and every freed block is uncached, back at the free
    queue's head; with caching on, the same second request got blocks 3, 4, 5 (above)."""
    p = pool(drv, 8, 1 << 20, 1 << 30, 1, 0)
    serve(drv, p, "a", list(range(1, 11)))
    assert drv.peek(p, [*range(1, 9), 50, 51]) == 0
    hits, blocks = serve(drv, p, "d", list(range(100, 110)))
    assert hits == 0 and sorted(blocks) == [1, 2, 3]
    assert serve(drv, p, "s", list(range(1, 11)), stub=True)[0] == 9  # a stub all the same


def test_a_stub_takes_fresh_blocks_for_its_whole_prompt(drv: EngineAllocators) -> None:
    p = pool(drv)
    serve(drv, p, "a", list(range(1, 11)))
    # no lookup although its prompt is cached: all but its last token taken as computed, the
    # free queue's head, uncached block first
    assert serve(drv, p, "s", list(range(1, 11)), stub=True) == (9, [3, 4, 5])


def test_a_decode_step_adds_a_block_when_its_position_starts_one(drv: EngineAllocators) -> None:
    p = pool(drv, 4)  # blocks 1..3
    drv.add(p, "a", False, 20, list(range(1, 8)))
    first, *rest = drv.steps(p, 7)
    assert first["new"] == [["a", 0, [1, 2]]] and first["first"] == ["a"]  # positions 0..6
    # position 7 fills block 2; position 8 needs block 3; 9..11 fit in it
    assert [s["grow"] for s in rest[:5]] == [[], [["a", [3]]], [], [], []]
    assert rest[5]["preempted"] == ["a"]  # position 12: no block left, the engine preempts


def test_the_seat_limit_and_the_token_budget_hold_requests_back(drv: EngineAllocators) -> None:
    """max_num_seqs 2: the third request waits for a seat; a budget of 6 tokens per step
    chunks a 10-token prompt over two steps, beside the running requests' decode tokens."""
    p = pool(drv, 16, 2, 6, 1)
    for rid, n_out in (("a", 3), ("b", 3), ("c", 1)):
        drv.add(p, rid, False, n_out, [*range(100 * len(rid) + ord(rid[0]) * 10, 0, -1)][:3])
    got = drv.steps(p, 4)
    assert [s["first"] for s in got] == [["a", "b"], [], [], ["c"]]
    assert got[2]["done"] == ["a", "b"]
    q = pool(drv, 16, 4, 6, 1)
    drv.add(q, "r", False, 2, list(range(1, 3)))
    drv.add(q, "long", False, 1, list(range(10, 20)))
    got = drv.steps(q, 3)
    # step 0: r's 2 tokens and 4 of long's 10; step 1: r's decode token and 5 more; step 2: 1
    assert [s["first"] for s in got] == [["r"], [], ["long"]]
    assert got[0]["new"][1][:2] == ["long", 0] and got[1]["done"] == ["r"]


def _req(*fields: Any, stub: bool = False) -> Req:
    """support.traces's request (times in ms), with its cached tokens last."""
    *head, cached = fields
    return replace(req(*head, stub=stub), cached_tokens=cached)


def test_steps_merge_one_steps_outputs_and_unlogged_steps_fill_the_gaps() -> None:
    a = _req("a", "x", 0, 10, 40, 6, 6, 0)  # 6 tokens: 6 steps, 4 of them logged
    b = _req("b", "y", 15, 20, 20, 5, 1, 0)  # first token and completion in one step
    c = _req("c", "y", 25, 30, 40, 5, 2, 0)  # 2 steps: 30 and 40 follow each other
    d = _req("d", "y", 25, 30, 30, 5, 1, 0)
    reqs = [a, b, c, d]
    clusters = steps([*reqs, _req("e", "y", 0, 40, 40, 5, 1, 0)], 1 * MS)
    assert clusters == [10 * MS, 20 * MS, 30 * MS, 40 * MS]
    sp = spans(reqs, clusters)
    assert sp == [(0, 3, 2), (1, 1, 0), (2, 3, 0), (2, 2, 0)]
    # a's two unlogged steps lie between 10 and 30 (c pins 30..40 to one step): 0+2, 1+1, 2+0
    assert sorted(step_layouts(sp, 4, 100)) == [[0, 2, 0], [1, 1, 0], [2, 0, 0]]
    # a request with more logged steps than tokens was preempted: not modelled
    assert spans([_req("f", "y", 0, 10, 40, 5, 2, 0)], clusters) is None


def test_step_layouts_are_every_solution_of_the_step_counts() -> None:
    """Against brute force over small random logs: every count of unlogged steps per gap that
    gives each request its own count, and nothing else; a long log does not recurse."""
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randrange(1, 6)
        sp = []
        for _ in range(rng.randrange(1, 5)):
            a = rng.randrange(n)
            b = rng.randrange(a, n)
            sp.append((a, b, rng.randrange(3)))
        brute = [
            list(gaps)
            for gaps in product(range(3), repeat=n - 1)
            if all(sum(gaps[a:b]) == d for a, b, d in sp)
            and all(g == 0 for i, g in enumerate(gaps) if not any(a <= i < b for a, b, _ in sp))
        ]
        assert sorted(step_layouts(sp, n, 10_000)) == sorted(brute), sp
    assert step_layouts([(0, 5000, 0)], 5001, 10) == [[0] * 5000]


def test_one_steps_outputs_are_microseconds_apart_steps_milliseconds() -> None:
    """Outputs of one step 2 us apart, two steps 3 ms apart (times in microseconds): the
    first gap ten times the one below it starts the steps, though 5 ms are allowed."""
    a = Req("a", "x", 0, 10_000, 410_000, 5, 5, False, 0)  # 100 ms steps
    b = Req("b", "y", 0, 10_002, 413_000, 5, 5, False, 0)
    assert merge_gap([a, b], 5_000) == 3_000
    assert steps([a, b], merge_gap([a, b], 5_000)) == [10_000, 410_000, 413_000]
    # never more than a quarter of the shortest step a request's times imply
    c = Req("c", "y", 0, 10_001, 18_001, 5, 5, False, 0)  # 2 ms steps
    assert merge_gap([a, b, c], 5_000) == 500


def test_only_times_logged_together_and_finely_mark_the_steps() -> None:
    """Steps are read off the times only where the log shows them: outputs logged together
    (2 us apart) in steps milliseconds apart. Not where every output was logged on its own
    (a gateway's delays spread them), nor where the times are to the millisecond (outputs of
    neighbouring steps can round to one time)."""
    a = Req("a", "x", 0, 10_000, 410_000, 5, 5, False, 0)  # 100 ms steps
    b = Req("b", "y", 0, 10_002, 413_000, 5, 5, False, 0)
    assert shows_steps([a, b], merge_gap([a, b], 5_000))
    spread = [replace(b, first_token_us=11_700)]  # 1.7 ms after a's first token
    assert not shows_steps([a, *spread], merge_gap([a, *spread], 5_000))
    alone = [replace(b, first_token_us=60_000, completed_us=460_000)]
    assert not shows_steps([a, *alone], merge_gap([a, *alone], 5_000))
    ms = [replace(r, first_token_us=10_000) for r in (a, b)]  # to the millisecond
    assert resolution([10_000, 410_000, 413_000]) == 1_000
    assert not shows_steps(ms, merge_gap(ms, 5_000))


def test_a_log_whose_times_may_not_be_the_steps_clears_nobody_unless_stated(
    drv: EngineAllocators,
) -> None:
    """The log of the next test, its times to the millisecond: nothing says they are the
    engine's steps, so nothing is run and nobody cleared; stated exact (0 ms of delivery
    jitter), it is rebuilt; stated at 25 ms, the steps are not read off the times."""
    reqs = [
        _req("a", "acct-a", 0, 10, 10, 6, 1, 0),
        _req("b", "acct-b", 15, 20, 20, 6, 1, 0),
        _req("s", "acct-c", 25, 30, 40, 6, 2, 5, stub=True),
    ]
    unstated = explore(UnifiedNode("n", reqs, BS, 6, 1 * MS), drv)
    assert not unstated.consistent and not unstated.exposures and unstated.runs == 0
    assert "do not mark the engine's steps" in unstated.why, unstated.why
    assert "--delivery-jitter-ms 10 states that rounding" in unstated.why, unstated.why
    exact = explore(UnifiedNode("n", reqs, BS, 6, 1 * MS, jitter_us=0), drv)
    assert exact.consistent  # and the node says the stated bound left the steps marked
    assert "mark the steps under the stated 0.0 ms of delivery jitter" in exact.note, exact.note
    wide = UnifiedNode("n", reqs, BS, 6, 1 * MS, jitter_us=25 * MS)
    assert "further apart than the logged steps" in wide.unstepped()


def test_the_stub_reads_what_the_last_request_left_in_the_head_blocks(
    drv: EngineAllocators,
) -> None:
    """Blocks 1..5, 4 slots each. a (6 tokens, one output) is freed at its first step: its
    partial block 2 to the queue's head, its full block 1 (cached) to the tail: 2 3 4 5 1. b
    (6 tokens) takes 2, 3 and leaves 3 at the head (partial; it wrote its positions 4, 5 in
    slots 0, 1) and 2 cached at the tail: 3 4 5 1 2. The stub (6 tokens) takes 3 and 4 and
    reads positions 0..4: b's 2 slots, then slots nobody wrote. a is not among its writers."""
    reqs = [
        _req("a", "acct-a", 0, 10, 10, 6, 1, 0),
        _req("b", "acct-b", 15, 20, 20, 6, 1, 0),
        _req("s", "acct-c", 25, 30, 40, 6, 2, 5, stub=True),
    ]
    node = UnifiedNode("n", reqs, BS, 6, 1 * MS, jitter_us=0)
    res = explore(node, drv)
    assert res.consistent and res.kept == res.runs
    assert dict(res.tokens) == {(2, 1): 2}


def test_a_later_hit_on_the_stubs_blocks_reads_what_it_read(drv: EngineAllocators) -> None:
    """Blocks 1..3, 4 slots each. a (acct-a, 12 tokens) fills 1, 2, 3, all full and cached,
    freed to the tail in reverse: 3 2 1. The stub s (acct-c, 8 tokens) takes 3 and 2 without a
    lookup and reads positions 0..6: a's 8..11 in 3, a's 4..6 in 2 (7 slots); it writes its
    position 7 (slot 3 of block 2) and its blocks are cached under its prompt's hashes. r
    (acct-c, 10 tokens, 8 logged as cached) is served both from the cache, as only a stub
    sharing its account's prefix allows: it reads all 8 slots, a's 7 and s's 1. Without a read
    through the cache, r would be listed nowhere."""
    reqs = [
        _req("a", "acct-a", 0, 10, 10, 12, 1, 0),
        _req("s", "acct-c", 15, 20, 20, 8, 1, 7, stub=True),
        _req("r", "acct-c", 25, 30, 30, 10, 1, 8),
    ]
    res = explore(UnifiedNode("n", reqs, BS, 4, 1 * MS, jitter_us=0), drv)
    assert res.consistent and res.kept == 1 and res.runs == 2
    assert dict(res.tokens) == {(1, 0): 7, (2, 0): 7, (2, 1): 1}


def test_a_log_the_manager_cannot_reproduce_keeps_no_run(drv: EngineAllocators) -> None:
    """b claims a 4-token hit on a prefix nobody of its account computed: no run keeps it."""
    reqs = [
        _req("a", "acct-a", 0, 10, 10, 6, 1, 0),
        _req("b", "acct-b", 15, 20, 20, 6, 1, 4),
        _req("s", "acct-c", 25, 30, 40, 6, 2, 5, stub=True),
    ]
    res = explore(UnifiedNode("n", reqs, BS, 6, 1 * MS, jitter_us=0), drv)
    assert not res.consistent and res.kept == 0 and "b" in res.why


def test_the_logged_limits_bind_the_runs(drv: EngineAllocators) -> None:
    """Three requests of one output token each, all three first tokens in one logged step: a
    run exists without limits, none with two seats (the scheduler would hold c back a step);
    with a budget of 4 tokens per step c's 6-token prompt arrives a step early and is chunked,
    and its first token still falls where the log has it."""
    reqs = [
        _req("a", "acct-a", 0, 10, 10, 2, 1, 0),
        _req("b", "acct-b", 1, 10, 10, 2, 1, 0),
        _req("c", "acct-c", 2, 10, 10, 6, 1, 0),
    ]
    assert explore(UnifiedNode("n", reqs, BS, 8, 1 * MS, jitter_us=0), drv).consistent
    two = explore(UnifiedNode("n", reqs, BS, 8, 1 * MS, Limits(max_num_seqs=2), jitter_us=0), drv)
    assert not two.consistent and "c" in two.why
    alone = [replace(reqs[2], received_us=0)]
    chunked = UnifiedNode("n", alone, BS, 8, 1 * MS, Limits(max_batched=4), jitter_us=0)
    assert chunked.arrivals([0]) == {-1: [0]}  # a step before the first logged one
    assert explore(chunked, drv).consistent
    # c takes 4 tokens in a step of its own and its last 2 beside a's 2 in the logged step;
    # with b's 2 as well that step would need 6: b's first token would come a step later
    with_a = [replace(reqs[0], received_us=1), *alone]
    assert explore(
        UnifiedNode("n", with_a, BS, 8, 1 * MS, Limits(max_batched=4), jitter_us=0), drv
    ).consistent
    three = [*with_a, reqs[1]]
    res = explore(UnifiedNode("n", three, BS, 8, 1 * MS, Limits(max_batched=4), jitter_us=0), drv)
    assert not res.consistent and "b" in res.why


def test_limits_a_damaged_log_gives_are_held_to_what_vllm_accepts(drv: EngineAllocators) -> None:
    """More seats than tokens per step (vLLM refuses to start so): the scheduler is made with
    as many seats as tokens, and the run goes on instead of stopping the driver."""
    reqs = [_req("a", "acct-a", 0, 10, 10, 2, 1, 0)]
    res = explore(
        UnifiedNode("n", reqs, BS, 8, 1 * MS, Limits(max_num_seqs=64, max_batched=4), jitter_us=0),
        drv,
    )
    assert res.consistent
    assert Limits(max_num_seqs=64, max_batched=4).config() == (4, 4, 1, 1)


def test_runs_on_the_clock_cut_short_clear_nobody(
    drv: EngineAllocators, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no step layout fits, the runs on the clock decide arrivals depth first up to a
    limit; past it the runs made are a sample, and a run that fits among them is not the
    engine's for sure: the node keeps none and clears nobody."""
    reqs = [
        _req("a", "acct-a", 0, 10, 10, 2, 1, 0),
        _req("b", "acct-b", 1, 10, 10, 2, 1, 0),
        _req("c", "acct-c", 2, 10, 10, 6, 1, 0),
    ]
    node = UnifiedNode("n", reqs, BS, 8, 1 * MS, Limits(max_num_seqs=2), jitter_us=0)
    fits = UnifiedRun(exposures={(2, 0): 1})

    def sampled(*_: object) -> Iterator[UnifiedRun]:
        yield fits
        yield UnifiedRun(ok=False, why="more than 1 runs on the clock", cut=True)

    monkeypatch.setattr(explore_module, "timed_runs", sampled)
    res = explore(node, drv)
    assert not res.consistent and not res.exposures and res.kept == 0
    assert "runs on the clock" in res.why and "nothing is cleared" in res.why, res.why
    monkeypatch.setattr(explore_module, "timed_runs", lambda *_: iter([fits]))
    assert explore(node, drv).consistent  # every run made: the fitting one is kept
