"""Replay suspects: decode each from the KV it really read, and clean from its own prompt.

Verdicts (DESIGN.md §5): `confirmed` when the contaminated replay reproduces the delivered output
(by token ids, or by response_sha256 when the ids were not kept), the clean replay does not, and
the decode read another request's data; `not-reproduced` otherwise; `cannot-replay` with the
reason when a replay cannot be run. Every suspect gets a row: nothing is skipped silently."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from forensics.errors import ReplayError, UsageError
from forensics.replay.decode import decode_with_evidence, prefill_first_token
from forensics.replay.ledger import SuspectPlan, plan_suspect

CONFIRMED = "confirmed"
NOT_REPRODUCED = "not-reproduced"
CANNOT_REPLAY = "cannot-replay"

ProgressFn = Callable[[str, int, int | None], None]


def response_sha256(tokens: Sequence[int]) -> str:
    """Hex SHA-256 of the ','-joined decimal token ids (the request log's response_sha256)."""
    return hashlib.sha256(",".join(str(int(t)) for t in tokens).encode("ascii")).hexdigest()


@dataclass
class SuspectResult:
    request_id: str
    verdict: str
    reason: str
    delivered_sha256: str | None = None
    contaminated_sha256: str | None = None
    clean_sha256: str | None = None
    tokens: int = 0
    seconds: float = 0.0
    decode_node: str | None = None
    output_tokens: int | None = None
    foreign_slots: int | None = None
    unwritten_slots: int | None = None
    unwritten_share: float | None = None
    attention: dict[str, tuple[float | None, int]] = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float | None:
        return round(self.tokens / self.seconds, 1) if self.seconds > 0 else None


@dataclass
class Replayed:
    """The two replays of one suspect."""

    contaminated: list[int]
    clean: list[int]
    writer_share: dict[str, float]
    unwritten_share: float
    forwarded: int


def replay_plan(model: Any, plan: SuspectPlan) -> Replayed:
    """Decode the suspect from what it read, and clean from its own prompt."""
    first = prefill_first_token(model, plan.processed)
    dirty = decode_with_evidence(model, plan.writers, plan.slots, first, plan.n_out)
    clean_first = prefill_first_token(model, plan.prompt)
    own = [(plan.request_id, i) for i in range(len(plan.prompt))]
    clean = decode_with_evidence(model, {plan.request_id: plan.prompt}, own, clean_first,
                                 plan.n_out)
    forwarded = len(plan.processed) + len(plan.prompt) + dirty.forwarded_tokens \
        + clean.forwarded_tokens
    return Replayed(dirty.tokens, clean.tokens, dirty.writer_share, dirty.unwritten_share,
                    forwarded)


def judge(plan: SuspectPlan, replayed: Replayed) -> tuple[str, str]:
    """(verdict, reason) for a suspect whose replays ran."""
    dirty_ok = _reproduces(plan, replayed.contaminated)
    clean_ok = _reproduces(plan, replayed.clean)
    foreign = plan.foreign
    if dirty_ok and not clean_ok and foreign:
        return CONFIRMED, (f"the replay from the KV it read ({sum(foreign.values())} positions "
                           f"of {len(foreign)} other request(s)) reproduces the delivered output; "
                           "the clean replay does not")
    if not dirty_ok:
        return NOT_REPRODUCED, ("the replay from the KV it read does not reproduce the delivered "
                                f"output{_first_difference(plan, replayed.contaminated)}")
    if clean_ok:
        return NOT_REPRODUCED, "the clean replay from its own prompt also reproduces the output"
    return NOT_REPRODUCED, (f"its decode read no other request's data ({plan.unwritten} "
                            "never-written positions, replayed as zeros): no leak to confirm")


def _reproduces(plan: SuspectPlan, tokens: list[int]) -> bool:
    if plan.delivered is not None:
        return tokens == plan.delivered
    return response_sha256(tokens) == plan.delivered_sha256


def _first_difference(plan: SuspectPlan, tokens: list[int]) -> str:
    if plan.delivered is None:
        return " (response_sha256 differs)"
    for i, (a, b) in enumerate(zip(tokens, plan.delivered, strict=False)):
        if a != b:
            return f" (first difference at output token {i})"
    return f" ({len(tokens)} tokens replayed, {len(plan.delivered)} delivered)"


def replay_suspect(con: duckdb.DuckDBPyConnection, model: Any, request_id: str) -> SuspectResult:
    """Plan, replay and judge one suspect; failures become cannot-replay with the reason."""
    started = time.perf_counter()
    try:
        plan = plan_suspect(con, request_id)
    except ReplayError as exc:
        return SuspectResult(request_id, CANNOT_REPLAY, str(exc))
    result = _planned_result(plan)
    try:
        replayed = replay_plan(model, plan)
    except ReplayError as exc:
        result.verdict, result.reason = CANNOT_REPLAY, str(exc)
        return result
    except (MemoryError, RuntimeError) as exc:
        if not _is_out_of_memory(exc):
            raise
        _free_memory()
        result.verdict, result.reason = CANNOT_REPLAY, f"out of memory: {exc}".splitlines()[0]
        return result
    result.verdict, result.reason = judge(plan, replayed)
    _fill(result, plan, replayed, time.perf_counter() - started)
    return result


def _planned_result(plan: SuspectPlan) -> SuspectResult:
    delivered = response_sha256(plan.delivered) if plan.delivered is not None \
        else plan.delivered_sha256
    return SuspectResult(
        plan.request_id, CANNOT_REPLAY, "", delivered_sha256=delivered,
        decode_node=plan.decode_node, output_tokens=plan.n_out,
        foreign_slots=sum(plan.foreign.values()), unwritten_slots=plan.unwritten)


def _fill(result: SuspectResult, plan: SuspectPlan, replayed: Replayed, seconds: float) -> None:
    result.contaminated_sha256 = response_sha256(replayed.contaminated)
    result.clean_sha256 = response_sha256(replayed.clean)
    result.tokens = replayed.forwarded
    result.seconds = round(seconds, 4)
    result.unwritten_share = replayed.unwritten_share if replayed.writer_share else None
    result.attention = {w: (replayed.writer_share.get(w), n) for w, n in plan.foreign.items()}


def _is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


def _free_memory() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@dataclass
class ReplayRun:
    model: str
    device: str
    results: list[SuspectResult]
    updated_tables: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {CONFIRMED: 0, NOT_REPRODUCED: 0, CANNOT_REPLAY: 0}
        for r in self.results:
            out[r.verdict] += 1
        return out


def replay_all(con: duckdb.DuckDBPyConnection, model_spec: str | None, device: str,
               request_ids: Sequence[str], progress: ProgressFn | None = None,
               missing_model: str = "no model given") -> ReplayRun:
    """Replay every suspect with one model; a model that is not given or cannot be loaded makes
    every suspect cannot-replay with that reason."""
    from forensics.replay.testmodel import load_model, resolve_device

    resolved = resolve_device(device)
    try:
        if model_spec is None:
            raise UsageError(missing_model)
        model = load_model(model_spec, resolved)
    except (UsageError, OSError) as exc:
        reason = f"model not available: {exc}".splitlines()[0]
        return ReplayRun(model_spec or "", resolved,
                         [SuspectResult(r, CANNOT_REPLAY, reason) for r in request_ids])
    results = []
    for done, request_id in enumerate(request_ids):
        if progress:
            progress(f"{request_id} ({done + 1}/{len(request_ids)})", done, len(request_ids))
        results.append(replay_suspect(con, model, request_id))
    if progress:
        progress("done", len(request_ids), len(request_ids))
    return ReplayRun(model_spec, resolved, results)
