"""What reconstruction says of itself in one line, and what it says when the real engines'
environment it drives is missing (the command line, investigate's summary)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

ENGINES_MISSING = (
    "nodes without a ledger could not be rebuilt because the real engines' environment is "
    "missing; build it with `bash scripts/engines_venv.sh` (or point KVFORENSICS_ENGINES_VENV "
    "at one) and run reconstruct again. Until then those nodes are judged by screening alone: "
    "every request that could have written a suspect's pages is a possible leaker"
)


MIXED = "mixed"  # release_free_list where the SGLang nodes' lists took different ways


class NodeLine(TypedDict):
    """One rebuilt node in the summary."""

    node: str
    allocator: str
    orders: int  # runs explored
    unread: int  # stub first reads the kept runs could not model
    sampled: NotRequired[int]  # stub first reads over a sample of orders, not every one
    why: NotRequired[str]  # a node no run of which fits its log: why (it clears nobody)


class Skipped(TypedDict):
    node: str
    why: str  # what would let reconstruction rebuild it


class ReconstructParameters(TypedDict):
    allocator: str
    orders: int
    skew_ms: float
    delivery_jitter_ms: float | None  # None: not stated
    sglang_free_list: str  # any | version | staged | front | back
    replay_budget: int


class ReconstructSummary(TypedDict):
    """What `reconstruct` returns, prints with --json and records under stages.reconstruct in
    manifest.json, in this order."""

    nodes: list[NodeLine]
    skipped: list[Skipped]
    engines_missing: bool  # a node needed the engines' environment and it is missing
    events: int
    pairs: int
    cross_account_pairs: int
    confirmed: int
    cleared: int
    layouts_replayed: int
    findings: bool
    free_lists: dict[str, int]  # SGLang: leaking accounts named per free list and over any
    release_free_list: str | None  # the way the SGLang nodes' release builds (MIXED: not one)
    other_ways: int  # leaking accounts only the ways kept apart name (--sglang-free-list version)
    parameters: ReconstructParameters
    headline: NotRequired[str]  # added by the investigate stage


def reconstruct_headline(summary: ReconstructSummary) -> str:
    """The nodes rebuilt, what they gave, the requests whose first read could not be modelled
    or rests on a sample of orders, and the nodes not rebuilt."""
    nodes = (
        ", ".join(
            f"{n['node']} ({n['allocator']}, {n['orders']} orders"
            + (
                f", {n['unread']} first reads not modelled: their candidates stay possible"
                if n.get("unread")
                else ""
            )
            + (
                f", {n['sampled']} stub reads over a sample of orders, not every one"
                if n.get("sampled")
                else ""
            )
            + (f"; nothing cleared: {n['why']}" if n.get("why") else "")
            + ")"
            for n in summary["nodes"]
        )
        or "none"
    )
    line = (
        f"nodes {nodes}; {summary['events']} events, {summary['pairs']} (receiver, leaker) "
        f"pairs, {summary['cross_account_pairs']} cross-account; replay confirmed "
        f"{summary['confirmed']} and cleared {summary['cleared']}"
    )
    mode, release = summary["parameters"]["sglang_free_list"], summary["release_free_list"]
    if mode == "any" or (mode == "version" and release is None):
        line += _ways(
            summary["free_lists"], release if mode == "any" and release != MIXED else None
        )
    if mode == "version":
        line += _release(release, summary["other_ways"])
    skipped = summary["skipped"]
    if skipped:
        line += f"; {len(skipped)} node(s) not rebuilt"
        if summary["engines_missing"]:
            line += f": {ENGINES_MISSING}"
        else:
            line += "".join(f" ({named}: {why})" for why, named in _by_reason(skipped))
    return line


def _ways(named: dict[str, int], release: str | None) -> str:
    """Where more than one free list was followed on SGLang nodes: how many leaking accounts
    each names alone against all of them, and the option that narrows the lists."""
    alone = {way: n for way, n in named.items() if way != "any"}
    if len(alone) < 2:
        return ""
    each = ", ".join(f"{way} alone {n}" for way, n in alone.items())
    hint = (
        f"; --sglang-free-list version takes the way the nodes' SGLang release builds: {release}"
        if release
        else ""
    )
    return (
        f"; no log shows where SGLang's allocator put freed pages back, so every way was "
        f"followed: the rebuilt reads name {named['any']} leaking accounts, {each} (state the "
        f"engine's way with --sglang-free-list{hint})"
    )


def _release(release: str | None, apart: int) -> str:
    """Where the lists took the way the nodes' SGLang release builds: which, and the leaking
    accounts only the other ways name, kept apart."""
    if release is None:
        return ""
    if release == MIXED:
        release = "not one way for every node (reconstructed_nodes.variants names each)"
    line = f"; SGLang free lists as the nodes' release builds them: {release}"
    if apart:
        line += (
            f"; {apart} leaking account(s) only the other ways' reads name are kept apart from "
            "the rebuilt pairs: possible leakers were the nodes not built as their release "
            "builds them (reconstructed_other_ways, the report; --sglang-free-list any lists "
            "them)"
        )
    return line


def _by_reason(skipped: list[Skipped], shown: int = 5) -> list[tuple[str, str]]:
    """The skipped nodes grouped by reason, in first-seen order: (reason, the nodes named,
    `shown` at most and how many more)."""
    groups: dict[str, list[str]] = {}
    for s in skipped:
        groups.setdefault(s["why"], []).append(s["node"])
    return [
        (
            why,
            ", ".join(nodes[:shown])
            + (f" and {len(nodes) - shown} more" if len(nodes) > shown else ""),
        )
        for why, nodes in groups.items()
    ]
