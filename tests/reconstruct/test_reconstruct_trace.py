"""The rebuilt page trace on the simulator's LIFO pool, with hand-worked expectations (no
engines environment needed)."""

from __future__ import annotations

from support.traces import MS, req

from forensics.engines.pools import PagePool
from forensics.reconstruct.orders import shuffled
from forensics.reconstruct.pagerun import PageRun, Reads
from forensics.reconstruct.trace import ALLOC, PAGE, NodeTrace, Req, runs

Op = tuple[int, int, int]


def replay(trace: NodeTrace, ops: list[Op], pool: PagePool) -> tuple[PageRun, Reads]:
    """One run over these operations, its events kept."""
    reads = Reads()
    run = PageRun(trace, pool, reads, events=True)
    for op in ops:
        run.step(op)
    return run, reads


def decode(reqs: list[Req], pool_slots: int = 160) -> NodeTrace:
    return NodeTrace("decode-0", "decode", 16, pool_slots, reqs)


def test_runs_merge_contiguous_pages() -> None:
    import numpy as np

    # pages 3,4 are contiguous, 9 is not: positions 0..39 of a sequence on pages [3, 4, 9]
    assert list(runs(np.array([3, 4, 9]), 0, 40, 16)) == [(48, 32, 0), (144, 8, 32)]
    assert list(runs(np.array([3, 4, 9]), 20, 33, 16)) == [(68, 12, 20), (144, 1, 32)]


def test_stub_reads_what_the_previous_holder_left() -> None:
    # A (prompt 40, 5 tokens out: writes positions 0..43) holds 3 pages and frees them; the stub
    # B (billed 48, processed 1) gets the same 3 pages (LIFO) and reads positions 1..47:
    # A wrote 43 of them (positions 1..43), 4 were never written.
    a = req("A", "acct-a", 0, 10, 100, 40, 5)
    b = req("B", "acct-b", 200, 210, 300, 48, 3, stub=True)
    trace = decode([a, b])
    run, reads = replay(trace, trace.ops, PagePool(160, 16))
    assert reads.tokens == {(1, 0): 43}
    assert run.events is not None
    ops = [(e[1], e[2]) for e in run.events]
    assert ops[:2] == [("A", "alloc"), ("A", "write")]
    assert ("B", "read") in ops and ops[-1] == ("B", "free")


def test_non_stub_and_fresh_pages_expose_nothing() -> None:
    a = req("A", "acct-a", 0, 10, 100, 40, 5)
    b = req("B", "acct-b", 200, 210, 300, 48, 3)  # a full prefill overwrote every position
    trace = decode([a, b])
    assert replay(trace, trace.ops, PagePool(160, 16))[1].tokens == {}
    # A still holds its pages when the stub arrives: the stub gets pages nobody wrote
    a = req("A", "acct-a", 0, 10, 500, 40, 5)
    b = req("B", "acct-b", 200, 210, 300, 48, 3, stub=True)
    trace = decode([a, b])
    assert replay(trace, trace.ops, PagePool(160, 16))[1].tokens == {}


def test_ties_are_explored_and_support_is_a_share() -> None:
    # A frees at 100 ms and the stub B arrives at 101 ms: within the 5 ms skew the timestamps
    # do not decide. In the timestamps' order A frees first and B reads A's KV; in an order
    # where B allocates first it gets fresh pages.
    a = req("A", "acct-a", 0, 10, 100, 40, 5)
    b = req("B", "acct-b", 101, 150, 300, 48, 3, stub=True)
    trace = decode([a, b])
    trace.find_groups(5 * MS)
    assert trace.groups == [(2, 4)]
    seen = []
    for k in range(16):
        order = shuffled(trace, k) if k else trace.ops
        i_free = order.index((100 * MS, 0, 0))
        i_alloc = order.index((101 * MS, 1, 1))
        got = replay(trace, order, PagePool(160, 16))[1].tokens
        seen.append(bool(got))
        assert bool(got) == (i_free < i_alloc)  # exposure exactly when A's free came first
    assert seen[0] and not all(seen)
    trace.find_groups(MS // 2)  # a finer clock resolution orders them
    assert trace.groups == []


def test_full_pool_defers_the_allocation_to_the_next_free() -> None:
    # a pool of 4 usable pages: A holds 3, B needs 3 and waits for A's free, then reads A's KV
    a = req("A", "acct-a", 0, 10, 100, 40, 5)
    b = req("B", "acct-b", 50, 150, 300, 48, 3, stub=True)
    trace = decode([a, b], pool_slots=80)
    run, reads = replay(trace, trace.ops, PagePool(80, 16))
    assert run.deferred == 1
    assert reads.tokens == {(1, 0): 43}


def test_modelled_decode_pages_do_not_chain_logged_operations_into_one_group() -> None:
    """Decode-page operations are placed at modelled times, one per page a step reaches: with
    pages of one token, one per token. Taken like logged times, their chain joined operations
    logged seconds apart into one group, whose sampled orders then swapped them (an independent
    SGLang case with one-token pages: leaking accounts 142 listed for 108 true; 121 after). A
    logged operation further than the skew from the previous logged one starts a group of its
    own, whatever decode pages fall between; logged operations closer than it stay one group."""
    long = req("a", "acct-0", 0, 10, 400, 1, 40)  # a page every 10 ms from 10 to 400 ms
    trace = NodeTrace("decode-0", "decode", 1, 400, [long, req("b", "acct-1", 200, 210, 260, 1, 5)])
    trace.find_groups(25 * MS)
    in_groups = {k for a, b in trace.groups for k in range(a, b)}
    kinds = {(trace.ops[k][1], trace.ops[k][2]): k for k in range(len(trace.ops))}
    assert kinds[(ALLOC, 0)] not in in_groups  # a's arrival: before, chained to b's by pages
    for a, b in trace.groups:  # each group: logged operations closer than the skew
        times = [trace.ops[k][0] for k in range(a, b) if trace.ops[k][1] != PAGE]
        assert all(y - x < 25 * MS for x, y in zip(times, times[1:], strict=False))
    assert any(kinds[(ALLOC, 1)] in range(a, b) for a, b in trace.groups)  # b's own stretch
