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

from collections.abc import Mapping
from functools import partial
from typing import Any

import duckdb

from forensics.analysis import aggregate
from forensics.analysis.screening import STUB_REASONS, screen
from forensics.base.progress import ProgressFn, no_progress
from forensics.casedb.schema_docs import main_tables
from forensics.casedb.sql import one_row, run_script, sql, tables
from forensics.context import RunContext, StageResult
from forensics.errors import UsageError
from forensics.options import ReconstructOptions, ScreeningParams
from forensics.reconstruct.decide import Decider, load_decider
from forensics.reconstruct.explore import explore
from forensics.reconstruct.freelist import release_free_list
from forensics.reconstruct.headline import (
    NodeLine,
    ReconstructParameters,
    ReconstructSummary,
    Skipped,
    reconstruct_headline,
)
from forensics.reconstruct.limits import (
    NotRebuilt,
    caching_decided,
    engine_facts,
    engine_limits,
    unlogged_limits_bound,
)
from forensics.reconstruct.paged import EnginesMissing, Pools, node_row, paged_node
from forensics.reconstruct.store import insert_requests, store_runs
from forensics.reconstruct.trace import NodeTrace, Req
from forensics.reconstruct.unified import UnifiedNode


def allocator_for(engine: str | None, chosen: str) -> str:
    if chosen != "auto":
        return chosen
    name = (engine or "").lower()
    return "sglang" if "sglang" in name else "vllm" if "vllm" in name else "lifo"


def reconstruct(
    con: duckdb.DuckDBPyConnection,
    options: ReconstructOptions | None = None,
    progress: ProgressFn = no_progress,
) -> ReconstructSummary:
    """Write the reconstructed_* tables for every ledger-less node; returns the summary. All in
    one transaction: a run stopped by an error (an option a node cannot take, the engines'
    driver gone) leaves the tables of the run before, not emptied ones beside that run's
    analysis."""
    con.begin()
    try:
        summary = _rebuild(con, options or ReconstructOptions(), progress)
    except BaseException:
        con.rollback()
        raise
    con.commit()
    return summary


def _rebuild(
    con: duckdb.DuckDBPyConnection, rp: ReconstructOptions, progress: ProgressFn
) -> ReconstructSummary:
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
            facts = engine_facts(con, node)
            if why := _not_described(con, node, kind, role, engine, facts):
                _skip(con, skipped, node, why)
                continue
            # the way the node's SGLang release builds its allocator (an SGLang node only)
            release = release_free_list(version, role, int(page_size)) if kind == "sglang" else None
            rebuild = (
                partial(unified_node, facts=facts, progress=_within(progress, node))
                if kind == "vllm" and role == "unified"
                else partial(
                    paged_node,
                    requests=_requests(con, node, role),
                    release=(version, release),
                    facts=facts,
                )
            )
            try:
                row = rebuild(
                    con, pools, rp, decider, node, role, kind, int(page_size), int(pool_slots)
                )
            except EnginesMissing as exc:
                _skip(con, skipped, node, str(exc))
                engines_missing = True
                continue
            except NotRebuilt as exc:
                _skip(con, skipped, node, str(exc))
                continue
            sampled, why = row.pop("sampled", 0), row.pop("why", "")
            con.execute(
                sql("reconstruct/insert_node"),
                {
                    **row,
                    "engine": engine,
                    "engine_version": version,
                    "allocator_version": pools.version(kind) if kind != "lifo" else None,
                    "consistent": row.get("consistent"),
                    "listed_free_list": row.get("listed_free_list"),
                },
            )
            line = NodeLine(
                node=row["node"],
                allocator=row["allocator"],
                orders=row["orders"],
                unread=row["unread"],
                sampled=sampled,
            )
            if why:
                line["why"] = why
            lines.append(line)
    finally:
        pools.close()
    events, pairs, cross, confirmed, cleared = con.execute(sql("reconstruct/summary")).fetchall()[0]
    named = dict(con.execute(sql("reconstruct/free_lists")).fetchall())
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
        free_lists=named,
        release_free_list=con.execute(sql("reconstruct/listed_free_list")).fetchall()[0][0],
        other_ways=con.execute(sql("reconstruct/other_ways")).fetchall()[0][0],
        parameters=ReconstructParameters(
            allocator=rp.allocator.value,
            orders=rp.orders,
            skew_ms=rp.skew_ms,
            delivery_jitter_ms=rp.delivery_jitter_ms,
            sglang_free_list=rp.free_list.value,
            replay_budget=rp.replay_budget,
        ),
    )


NO_SIZES = (
    "no page size or pool size in the nodes table or the engine's start-up log; give them in "
    "nodes.csv (page_size, pool_slots) to rebuild its page trace"
)


ASSUMED_PAGE_SIZE = (
    "its engine's log names no block size, and vLLM's default depends on the platform and the "
    "attention backend (16 on most GPUs, 128 on the CPU build): pages of a guessed size can put "
    "the wrong requests in a stub's blocks; give page_size in nodes.csv (the engine's "
    "--block-size) to rebuild its page trace"
)


RESTARTED = (
    "its logs show the engine starting more than once, and not all before the requests it "
    "served (or a start the log does not date): each start makes a new pool, and a page trace "
    "run across one as one pool is not the engine's; give each start's log as a node of its own "
    "(requests named by the node they ran on) to rebuild it"
)


HYBRID = (
    "its engine's log shows more than one KV cache group (block sizes {groups}: a hybrid model, "
    "with sliding-window or state-space layers beside full attention), and reconstruction "
    "drives vLLM's manager with one group of full attention: each group allocates and frees "
    "blocks of its own, so pages modelled with one are not the engine's; such a node is not "
    "rebuilt"
)


def _not_described(  # noqa: PLR0913
    con: duckdb.DuckDBPyConnection,
    node: str,
    kind: str,
    role: str,
    engine: str | None,
    facts: Mapping[str, str],
) -> str:
    """Why the node's logs do not describe the engine well enough to rebuild its pages, or ''
    (a unified vLLM node's prefix caching is decided with its requests: limits.caching_decided).
    A vLLM prefill or decode node is modelled without a prefix cache, so it is rebuilt only
    where its log says caching was off; vLLM v1 turns it on unless told otherwise. A node
    whose engine is not named vLLM but is modelled on vLLM's pool (--allocator vllm) is taken
    as the responder states it. A node modelled on SGLang's pool is rebuilt only as a
    disaggregated prefill or decode node, the only kind the model describes."""
    if _page_size_assumed(con, node):
        return ASSUMED_PAGE_SIZE
    if _restarted(con, node):
        return RESTARTED
    if kind == "vllm" and (groups := facts.get("kv_cache_groups")):
        return HYBRID.format(groups=groups)
    if kind == "sglang" and role == "unified":
        return SGLANG_UNIFIED
    if kind == "sglang" and role == "decode" and facts.get("decode_radix_cache") == "True":
        return SGLANG_DECODE_RADIX
    if kind == "vllm" and role != "unified":
        caching = engine_limits(facts).prefix_caching
        if caching:
            return PAGED_CACHING
        if caching is None and "vllm" in (engine or "").lower():
            return PAGED_CACHING_UNKNOWN
    return ""


def _restarted(con: duckdb.DuckDBPyConnection, node: str) -> bool:
    """Whether the node's engine may have started again while serving its requests
    (queries/reconstruct/restarted.sql)."""
    if "node_starts" not in tables(con):
        return False
    row = one_row(con.execute(sql("reconstruct/restarted"), {"node": node}))
    return bool(row and row[0])


def _page_size_assumed(con: duckdb.DuckDBPyConnection, node: str) -> bool:
    """Whether the node's page size is only the default the log audit assumed (no nodes-file
    row and no log line gives one): screening may use it, a rebuilt trace may not."""
    if "node_facts" not in tables(con):
        return False
    row = one_row(con.execute(sql("reconstruct/page_size_assumed"), {"node": node}))
    return bool(row and row[0])


def _skip(con: duckdb.DuckDBPyConnection, skipped: list[Skipped], node: str, why: str) -> None:
    """A node reconstruction cannot rebuild: in the summary and reconstruct_skipped, so that
    the analysis, the report and the command line name it with the fix."""
    skipped.append(Skipped(node=node, why=why))
    con.execute(sql("reconstruct/insert_skipped"), {"node": node, "reason": why})


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


SGLANG_UNIFIED = (
    "it serves both prefill and decode (SGLang without disaggregation), and SGLang's pages are "
    "modelled as its disaggregated nodes take them: a decode node pre-allocating the billed "
    "prompt when the request arrives, and freed pages staged and merged back sorted (need_sort, "
    "which SGLang turns on only for a disaggregated node); without disaggregation SGLang frees "
    "pages unsorted, schedules prefills itself and keeps finished requests' pages in its radix "
    "cache, so pages modelled so can put the wrong requests in a stub's pages; such a node is "
    "not rebuilt"
)


SGLANG_DECODE_RADIX = (
    "its engine's log says the decode node kept a radix cache of its own "
    "(disaggregation_decode_enable_radix_cache=True): finished requests' pages stay in it until "
    "evicted, and a decode node's pages are modelled without one, freed when the request ends; "
    "pages modelled so can put the wrong requests in a stub's pages; such a node is not rebuilt"
)


PAGED_CACHING = (
    "its engine's log says prefix caching was on, and a vLLM prefill or decode node's page "
    "trace is modelled without a prefix cache (vLLM puts freed cached blocks at the free "
    "queue's tail, not its head): pages modelled so can put the wrong requests in a stub's "
    "blocks; such a node is not rebuilt"
)


PAGED_CACHING_UNKNOWN = (
    "its engine's log does not say whether prefix caching was on (the engine banner's "
    "enable_prefix_caching), vLLM v1 turns it on unless told otherwise, and a vLLM prefill or "
    "decode node's page trace is modelled without a prefix cache: pages modelled so can put the "
    "wrong requests in a stub's blocks; keep the engine's start-up log with the case (rebuilt "
    "where it says caching was off)"
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
    *,
    facts: Mapping[str, str],
    progress: ProgressFn = no_progress,
) -> dict[str, Any]:
    """A vLLM unified node: its runs on vLLM's v1 scheduler, prefix caching on or off as the
    engine ran (forensics.reconstruct.unified), with the limits its engine facts give
    (limits.engine_facts); only runs that reproduce every logged step and cached_tokens."""
    reqs, reasons = _requests(con, node, role)
    limits = caching_decided(engine_limits(facts), reqs)
    why, left_out = unlogged_limits_bound(facts, limits, reqs)
    if why:
        raise NotRebuilt(why)
    try:
        drv = pools.driver()
    except UsageError as exc:
        raise EnginesMissing(str(exc)) from exc
    jitter = None if rp.delivery_jitter_ms is None else round(rp.delivery_jitter_ms * 1000)
    model = UnifiedNode(node, reqs, ps, pool_slots // ps, int(rp.skew_ms * 1000), limits, jitter)
    res = explore(model, drv, progress)
    trace = NodeTrace(node, role, ps, pool_slots, reqs)
    support = {pair: n / max(res.kept, 1) for pair, n in res.exposures.items()}
    store_runs(con, trace, res.events, support, res.tokens, {})
    unread = set() if res.consistent else {k for k, r in enumerate(reqs) if r.stub}
    insert_requests(con, node, reqs, reasons, set(), unread, set(), set())
    kept = f"{res.kept} of {res.runs} runs fit the log (its steps and cached_tokens)"
    kept += f"; {res.note}" if res.note else ""
    return node_row(trace, kind, res.ambiguous, res.runs, 0, len(unread)) | {
        "variants": f"vLLM v1 Scheduler, {limits.describe()}"
        + (f" ({left_out})" if left_out else "")
        + ": "
        + (kept if res.consistent else f"{kept} ({res.why})"),
        "consistent": res.consistent,
        "why": "" if res.consistent else res.why,
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
