"""What a vLLM unified node's log says of its scheduler, for stage.py: the limits it logged
(Limits), and whether that is enough to rebuild it.

A limit the log does not name is not applied (as large as vLLM allows). That is the engine's
run only where the limit could not have bound: the engine left it at vLLM's default (the
operator's arguments were logged and do not name it) and the requests the gateway had in
flight at once never reached the smallest default vLLM picks. The gateway's in-flight count
bounds the engine's from above: the engine holds a request from after the gateway received it
until before the gateway logged its completion. vLLM 0.32's defaults
(EngineArgs.get_batch_defaults):

- max_num_seqs: 128 at least (SchedulerConfig.DEFAULT_MAX_NUM_SEQS; the CPU build's server),
  and no more than the token budget;
- max_num_batched_tokens: 2048 at least on a CPU or CUDA device with one data-parallel rank
  (the server's; the offline LLM class and large GPUs default higher); elsewhere as little as
  256 (TPU v5p's server, a data-parallel MoE deployment). The tokens one step schedules are at
  most, over the requests in flight at once, each one's uncomputed prompt (its prompt less its
  logged prefix-cache hits, at least one token)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import duckdb

from forensics.casedb.sql import sql, tables
from forensics.reconstruct.runstate import Limits
from forensics.reconstruct.trace import Req

DEFAULT_SEATS_FLOOR = 128  # the fewest seats vLLM 0.32 defaults to
DEFAULT_BUDGET_FLOOR = 2048  # the smallest default token budget on a CPU or CUDA device
ANY_BUDGET_FLOOR = 256  # the smallest anywhere (TPU v5p's server, data-parallel MoE)


class NotRebuilt(Exception):
    """A node the log does not describe well enough to rebuild: skipped, with this reason."""


NO_CACHING = (
    "its engine's log does not say whether prefix caching was on (the engine banner's "
    "enable_prefix_caching) and no response reports a prefix-cache hit: vLLM frees and reuses "
    "blocks differently with it off, so a run of the wrong kind can put the wrong requests in a "
    "stub's blocks; keep the engine's start-up log with the case to rebuild it"
)


NO_LIMITS = (
    "its engine's log names neither max_num_seqs nor max_num_batched_tokens (or no log was "
    "given): runs without the limits can fit the log and not be the engine's (a real vLLM "
    "served with 4 seats and a 64-token budget, rebuilt without them, cleared a true leaker); "
    "keep the engine's start-up log with the case to rebuild it"
)


def engine_facts(con: duckdb.DuckDBPyConnection, node: str) -> dict[str, str]:
    """What the node's engine log says of its scheduler and KV cache at its latest start
    (queries/reconstruct/engine_limits.sql), read once per node; empty without logs."""
    if "node_facts" not in tables(con):
        return {}
    return dict(con.execute(sql("reconstruct/engine_limits"), {"node": node}).fetchall())


def engine_limits(facts: Mapping[str, str]) -> Limits:
    """The node's scheduler limits from its engine facts; not logged: not applied."""
    seqs, batched = facts.get("max_num_seqs"), facts.get("max_num_batched_tokens")
    caching = facts.get("prefix_caching")
    return Limits(
        int(seqs) if seqs else None,
        int(batched) if batched else None,
        facts.get("chunked_prefill", "True") == "True",
        None if caching is None else caching == "True",
    )


def caching_decided(limits: Limits, reqs: list[Req]) -> Limits:
    """The limits with prefix caching as logged, or on where it was not logged but a request
    that is not a stub was served a hit (only prefix caching serves one); else NotRebuilt."""
    if limits.prefix_caching is not None:
        return limits
    if any(r.cached_tokens for r in reqs if not r.stub):
        return replace(limits, prefix_caching=True)
    raise NotRebuilt(NO_CACHING)


def peaks(reqs: list[Req]) -> tuple[int, int]:
    """The most requests the gateway had in flight at once (received, completion not yet
    logged), and the most uncomputed prompt tokens (prompt less logged hits, at least one)
    they held at once."""
    marks: list[tuple[int, int, int]] = []
    for r in reqs:
        tokens = 1 if r.stub else max(1, r.prompt - (r.cached_tokens or 0))
        marks.append((r.received_us, 1, tokens))
        if r.completed_us is not None:  # else in flight to the end
            marks.append((r.completed_us, -1, -tokens))
    marks.sort(key=lambda m: (m[0], m[1]))  # a completion before an arrival at the same time
    most_n = most_t = n = t = 0
    for _, dn, dt in marks:
        n, t = n + dn, t + dt
        most_n, most_t = max(most_n, n), max(most_t, t)
    return most_n, most_t


def unlogged_limits_bound(
    facts: Mapping[str, str], limits: Limits, reqs: list[Req]
) -> tuple[str, str]:
    """Why a limit the node's log does not name (limits, as engine_limits read them from its
    facts) may have bound its scheduler, or ''; and where none may, what says so of a limit
    left out, or ''."""
    if limits.max_num_seqs is None and limits.max_batched is None:
        return NO_LIMITS, ""
    if limits.max_num_seqs is not None and limits.max_batched is not None:
        return "", ""
    seats, tokens = peaks(reqs)
    defaults = facts.get("operator_args") == "logged"
    if limits.max_num_seqs is None:
        limit, held, most = "max_num_seqs", f"{seats} requests", seats
        floor = min(DEFAULT_SEATS_FLOOR, limits.max_batched or DEFAULT_SEATS_FLOOR)
        if most <= 1:  # no limit binds one request at a time
            return "", f"{limit} not logged, left out: one request in flight at a time"
    else:
        limit, held, most = "max_num_batched_tokens", f"{tokens} uncomputed prompt tokens", tokens
        usual = facts.get("device") in ("cpu", "cuda") and facts.get("data_parallel_size") == "1"
        floor = DEFAULT_BUDGET_FLOOR if usual else ANY_BUDGET_FLOOR
    if not defaults:
        return _may_bind(limit, held, None), ""
    if most > floor:
        return _may_bind(limit, held, floor), ""
    return "", (
        f"{limit} not logged, left out: vLLM's default, at least {floor} here, was never "
        f"reached (at most {held} in flight at once)"
    )


def _may_bind(limit: str, held: str, floor: int | None) -> str:
    """Why a limit the log does not name may have bound: its default may be below what the
    gateway had in flight (floor: the least it can be), or, with the operator's arguments not
    logged (floor None), a value set lower."""
    unknown = (
        "has no line of the operator's arguments (`non-default args`) to show it was left at "
        "vLLM's default"
        if floor is None
        else f"was left at vLLM's default, which depends on the device and the deployment and "
        f"is {floor} at the least here"
    )
    return (
        f"its engine's log names no {limit} and {unknown}, and the requests in flight at once "
        f"held up to {held}: it may have bound, and runs without it can fit the log and not be "
        "the engine's; keep the engine's whole start-up log with the case (it is not rebuilt "
        "without the limit)"
    )
