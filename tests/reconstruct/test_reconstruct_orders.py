"""Every order the timestamps leave open, followed with runs merged where they reach one state
(forensics.reconstruct.orders), against a naive oracle: every combination of every group's
orders replayed from the start on a fresh pool, one full run each. The pairs (receiver,
leaker) found must be the same; merging may only save work."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from itertools import permutations, product
from pathlib import Path

import polars as pl
import pytest
from support.engines import engines_python
from support.simhelp import sglang_sim_options
from support.traces import MS, req

from forensics.analysis.stage import analyze
from forensics.db import connect
from forensics.engines.client import EngineAllocators
from forensics.engines.engine_pool import EnginePagePool
from forensics.engines.pools import PagePool
from forensics.ingest.load import ingest_case
from forensics.options import Allocator, ReconstructOptions
from forensics.reconstruct import orders
from forensics.reconstruct.headline import reconstruct_headline
from forensics.reconstruct.orders import count_orders, explore_orders
from forensics.reconstruct.pagerun import PageRun, Reads
from forensics.reconstruct.stage import reconstruct
from forensics.reconstruct.trace import PAGE, NodeTrace, Req, fixed, interleavings
from forensics.simulate.run import simulate

Op = tuple[int, int, int]
Pair = tuple[int, int]
PS, PAGES = 16, 12
SLOTS = 64  # one-token pages: a pool smaller than the busiest moment of _case


def _allowed(part: list[Op], perm: tuple[Op, ...]) -> bool:
    """The oracle's rule, written apart: each request's operations in their logged order."""
    return all(
        [op for op in perm if op[2] == i] == [op for op in part if op[2] == i]
        for i in {op[2] for op in part}
    )


def _naive_orders(part: list[Op]) -> list[tuple[Op, ...]]:
    return [p for p in dict.fromkeys(permutations(part)) if _allowed(part, p)]


def _case(seed: int) -> NodeTrace:
    """A decode node of 9 requests on a pool of 11 usable pages, times on a 10 ms grid with
    some 1 ms apart (groups under a 5 ms skew), a third of them stubs."""
    rng = random.Random(seed)
    reqs: list[Req] = []
    for k in range(9):
        recv = rng.choice(range(0, 300, 10)) + rng.choice((0, 0, 1))
        first = recv + rng.choice((10, 20, 30)) + rng.choice((0, 1))
        done = first + rng.choice((20, 40, 60, 90)) + rng.choice((0, 1))
        prompt, n_out = rng.choice((16, 20, 32, 40)), rng.choice((1, 8, 20, 30))
        reqs.append(req(f"r{k}", f"acct-{k % 4}", recv, first, done, prompt, n_out, k % 3 == 1))
    trace = NodeTrace("decode-0", "decode", PS, PAGES * PS, reqs)
    trace.find_groups(5 * MS)
    return trace


def _run(trace: NodeTrace, ops: list[Op], pool: PagePool) -> PageRun:
    run = PageRun(trace, pool, Reads(), events=False)
    for op in ops:
        run.step(op)
    run.close()
    return run


def _naive(trace: NodeTrace, new_pool: Callable[[], PagePool]) -> tuple[set[Pair], int]:
    """The pairs over every combination of the groups' orders, each run from the start; and
    how many combinations there were."""
    choices = [_naive_orders(trace.ops[a:b]) for a, b in trace.groups]
    pairs: set[Pair] = set()
    n = 0
    for pick in product(*choices):
        ops, pos = [], 0
        for (a, b), chosen in zip(trace.groups, pick, strict=True):
            ops += trace.ops[pos:a] + list(chosen)
            pos = b
        ops += trace.ops[pos:]
        reads = Reads()
        run = PageRun(trace, new_pool(), reads, events=False)
        for op in ops:
            run.step(op)
        run.close()
        pairs |= set(reads.support)
        n += 1
    return pairs, n


def _seeds(limit: int, count: int) -> list[int]:
    """Seeds whose cases have groups, stubs and at most `limit` combinations of orders."""
    out = []
    for seed in range(500):
        trace = _case(seed)
        if any(b - a > 7 for a, b in trace.groups):
            continue  # the oracle's permutations grow as the factorial
        combos = 1
        for a, b in trace.groups:
            combos *= len(_naive_orders(trace.ops[a:b]))
        if 8 <= combos <= limit and any(r.stub for r in trace.reqs):
            out.append(seed)
        if len(out) == count:
            break
    return out


def test_interleavings_are_every_permutation_that_keeps_the_fixed_orders() -> None:
    checked = 0
    for seed in range(60):
        trace = _case(seed)
        for a, b in trace.groups:
            part = trace.ops[a:b]
            if len(part) > 7:
                continue
            got = list(interleavings(part, fixed(part)))
            want = _naive_orders(part)
            assert got[0] == part  # the logged order first
            assert sorted(map(tuple, got)) == sorted(want)
            assert count_orders(part, fixed(part), 10**6) == len(want)
            checked += 1
    assert checked > 50


@pytest.mark.parametrize("seed", _seeds(400, 12))
def test_every_order_followed_finds_the_naive_pairs_on_the_lifo_pool(seed: int) -> None:
    trace = _case(seed)
    pool = lambda: PagePool(PAGES * PS, PS)  # noqa: E731
    want, combos = _naive(trace, pool)
    got = explore_orders(trace, pool, 8)
    assert not got.why and not got.sampled
    assert set(got.reads.support) == want
    assert got.most <= combos


def test_the_oracle_cases_find_leaks_and_merge_runs() -> None:
    """The cases above are not empty: stubs read others' KV, and runs were merged."""
    pairs, merged = 0, 0
    for seed in _seeds(400, 12):
        trace = _case(seed)
        pool = lambda: PagePool(PAGES * PS, PS)  # noqa: E731
        got = explore_orders(trace, pool, 8)
        pairs += len(got.reads.support)
        merged += got.orders > got.most
    assert pairs >= 10 and merged >= 6


@pytest.mark.parametrize(
    ("limit", "value", "why"),
    [
        ("MOST_RUNS", 1, "more than 1 distinct runs"),
        ("MOST_BYTES", 1, "more than 1 distinct runs"),  # a pool too big for two copies
        ("MOST_WORK", 0, "more than 0 whole runs' worth of operations"),
    ],
)
def test_past_a_limit_later_reads_are_sampled(
    monkeypatch: pytest.MonkeyPatch, limit: str, value: int, why: str
) -> None:
    monkeypatch.setattr(orders, limit, value)
    for seed in _seeds(400, 12):
        trace = _case(seed)
        pool = lambda: PagePool(PAGES * PS, PS)  # noqa: E731
        head = _run(trace, trace.ops, pool())
        got = explore_orders(trace, pool, 8)
        if got.sampled:
            assert why in got.why
            # the stubs read after the limit, and every pair of theirs in the logged order
            assert all(trace.reqs[i].stub for i in got.sampled)
            logged = {p for p in head.sink.support if p[0] in got.sampled}
            assert logged <= set(got.reads.support)
            assert all(got.reads.reads[i] >= 1 for i in got.sampled if i not in head.unread)
            return
    pytest.fail("no case went past the limit")


@pytest.mark.parametrize("kind", ["sglang", pytest.param("vllm", marks=pytest.mark.slow)])
def test_every_order_followed_finds_the_naive_pairs_on_the_engines_allocators(
    kind: str,
) -> None:
    with EngineAllocators(engines_python()) as drv:
        pool = lambda: EnginePagePool(PAGES * PS, PS, drv, kind)  # noqa: E731
        for seed in _seeds(150, 4):
            trace = _case(seed)
            want, _ = _naive(trace, pool)
            got = explore_orders(trace, pool, 8)
            assert not got.why
            assert set(got.reads.support) == want, seed


def test_a_stub_logged_just_before_the_free_that_made_room_is_read_in_the_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stub's first token is logged 2 ms before the free that gave it its pages (within
    the skew). Past the limit only a sample of orders is run: the logged order leaves the stub
    waiting at its first token (its read not modelled), and the order that frees first in
    every group reads it, with the freeing request as its leaker, even with no shuffle."""
    monkeypatch.setattr(orders, "MOST_INTERLEAVINGS", 1)
    reqs = [
        req("a", "acct-0", 0, 5, 100, 64, 1),  # holds all four pages
        req("s", "acct-1", 50, 98, 150, 64, 1, True),
    ]
    trace = NodeTrace("decode-0", "decode", PS, 5 * PS, reqs)
    trace.find_groups(5 * MS)
    head = _run(trace, trace.ops, PagePool(5 * PS, PS))
    assert 1 in head.unread  # the logged order: still waiting at its first token
    got = explore_orders(trace, lambda: PagePool(5 * PS, PS), 1)
    assert got.sampled == {1}
    assert set(got.reads.support) == {(1, 0)}
    first = orders.frees_first(trace)
    assert sorted(first) == sorted(trace.ops)
    for i in range(len(reqs)):  # each request's own operations in their order
        assert [op for op in first if op[2] == i] == [op for op in trace.ops if op[2] == i]


@pytest.mark.parametrize("kind", ["sglang", pytest.param("vllm", marks=pytest.mark.slow)])
def test_decode_pages_sent_as_one_stretch_run_as_one_operation_at_a_time(kind: str) -> None:
    """PageRun.steps sends a stretch of decode-page allocations to the engine in one call;
    the oracle is step() per operation on a pool of its own. One-token pages and a pool of
    SLOTS slots: stretches run out of free pages midway, and stubs read."""
    with EngineAllocators(engines_python()) as drv:
        for seed in range(6):
            base = _case(seed)
            trace = NodeTrace("decode-0", "decode", 1, SLOTS, base.reqs)
            pages = sum(kind == PAGE for _, kind, _ in trace.ops)
            one, many = Reads(), Reads()
            a = PageRun(trace, EnginePagePool(SLOTS, 1, drv, kind), one, events=True)
            b = PageRun(trace, EnginePagePool(SLOTS, 1, drv, kind), many, events=True)
            for op in trace.ops:
                a.step(op)
            b.steps(trace.ops)
            assert pages > 100 and b.deferred > 0, seed  # long stretches, a pool that ran out
            assert a.key() == b.key(), seed
            assert (a.writer == b.writer).all() and (a.wpos == b.wpos).all(), seed
            assert a.events == b.events and a.deferred == b.deferred, seed
            assert one == many and one.reads, seed
            a.close()
            b.close()


@pytest.mark.parametrize("kind", ["sglang", pytest.param("vllm", marks=pytest.mark.slow)])
def test_a_copied_engine_pool_answers_as_the_original(kind: str) -> None:
    with EngineAllocators(engines_python()) as drv:
        pool = EnginePagePool(PAGES * PS, PS, drv, kind)
        a, b = pool.alloc(3), pool.alloc(2)
        assert a is not None and b is not None
        pool.release(a)
        copy = pool.copy()
        assert copy.key() == pool.key()
        for k in (2, 4, 1):  # the same answers, in the same order
            got, again = pool.alloc(k), copy.alloc(k)
            assert got is not None and again is not None
            assert got.tolist() == again.tolist()
        pool.release(b)
        assert copy.key() != pool.key()  # one more free changes the state
        copy.release(b)
        assert copy.key() == pool.key()


def test_a_sampled_read_says_so_where_it_clears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the limit of runs followed at once (1 here), the later stubs are marked sampled, the
    node's variants say from which stub on, and what their reads clear says it rests on a
    sample; the simulator's true parties stay listed."""
    full = tmp_path / "full"
    simulate(full, sglang_sim_options())
    case = tmp_path / "case"
    shutil.copytree(full, case, ignore=shutil.ignore_patterns("kv_events", "ground_truth"))
    ingest_case(case, tmp_path / "case.duckdb")
    con = connect(tmp_path / "case.duckdb")
    monkeypatch.setattr(orders, "MOST_RUNS", 1)
    engines_python()  # built first where missing
    summary = reconstruct(con, ReconstructOptions(allocator=Allocator.SGLANG))
    analyze(con)
    sampled = {r for (r,) in con.execute(SAMPLED).fetchall()}
    assert sum(n.get("sampled", 0) for n in summary["nodes"]) == len(sampled)
    assert "stub reads over a sample of orders" in reconstruct_headline(summary)
    exact = {r for (r,) in con.execute(EXACT).fetchall()}
    assert sampled and exact  # the first reads were followed in every order, the later not
    notes = " ".join(v for (v,) in con.execute(VARIANTS).fetchall())
    assert "every order followed only up to more than 1 distinct runs" in notes
    cleared = con.execute(CLEARED).fetchall()
    assert {r for r, _ in cleared} & sampled and {r for r, _ in cleared} & exact
    for receiver, reason in cleared:
        assert ("a sample of orders" in reason) == (receiver in sampled), receiver
    truth = pl.read_csv(full / "ground_truth" / "accounts.csv", infer_schema_length=0)
    listed = set(con.execute("SELECT side, account_id FROM affected_accounts").fetchall())
    assert set(zip(truth["side"], truth["account_id"], strict=True)) <= listed
    con.close()


SAMPLED = "SELECT request_id FROM reconstructed_requests WHERE stub AND sampled"
EXACT = (
    "SELECT request_id FROM reconstructed_requests r JOIN reconstructed_nodes n USING (node) "
    "WHERE r.stub AND NOT r.sampled AND n.role = 'decode'"
)
VARIANTS = "SELECT variants FROM reconstructed_nodes"
CLEARED = (
    "SELECT receiver_request_id, reason FROM cleared_findings WHERE evidence = 'reconstruction'"
)
