"""Replay suspects: decode each from the KV it really read, and clean from its own prompt, and
judge the two replays (forensics.replay.judge); `cannot-replay` with the reason when a replay
cannot be run (a token beyond the vocabulary, not enough memory, a plan that cannot be made).
Every suspect gets a row: nothing is skipped silently. Many suspects share one store of rebuilt
writers, kept while memory allows."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb

from forensics.base.progress import ProgressFn
from forensics.errors import ReplayError
from forensics.replay import memory
from forensics.replay.decode import (
    WriterStore,
    decode_own,
    decode_with_evidence,
    prefill_logits,
    token_digest,
)
from forensics.replay.evidence import Evidence, scoring_temperature, weigh
from forensics.replay.judge import (
    Replayed,
    judge,
    response_sha256,
)
from forensics.replay.ledger import SuspectPlan, plan_suspect
from forensics.replay.stepwise import decode_stepwise
from forensics.replay.verdicts import Basis, Verdict


@dataclass
class SuspectResult:
    request_id: str
    verdict: Verdict
    reason: str
    delivered_sha256: str | None = None
    contaminated_sha256: str | None = None
    clean_sha256: str | None = None
    tokens: int = 0
    seconds: float = 0.0
    decode_node: str | None = None
    output_tokens: int | None = None
    foreign_slots: int | None = None
    uninitialised_slots: int | None = None
    uninitialised_share: float | None = None
    attention: dict[str, tuple[float | None, int]] = field(default_factory=dict)
    basis: Basis | None = None  # of a confirmation
    evidence: Evidence | None = None  # with the delivered token ids: the LLR and its picture

    @property
    def tokens_per_s(self) -> float | None:
        return round(self.tokens / self.seconds, 1) if self.seconds > 0 else None


def replay_plan(
    model: Any, plan: SuspectPlan, store: WriterStore | None = None, chunk: int | None = None
) -> Replayed:
    """Decode the suspect clean from its own prompt (one prefill gives its first token and KV),
    and from what it read: step by step (forensics.replay.stepwise) when its first step computed
    prompt positions over rebuilt KV or a later step read changed KV, else from its first read
    with the first token of its engine-side prefill (the same as the clean one when it processed
    its whole prompt). With the delivered tokens known, both replays are
    checked against them in one forward pass each; the clean one stops at its first token that
    differs (its hash covers the tokens up to there). The delivered token ids are scored
    teacher-forced in both (at the request's temperature): their log-likelihood ratio is the
    evidence."""
    temperature = scoring_temperature(plan.temperature)
    expected = plan.delivered if plan.delivered and len(plan.delivered) == plan.n_out else None
    clean_first, clean = decode_own(model, plan.prompt, plan.n_out, chunk, expected, temperature)
    forwarded = clean.forwarded_tokens
    first: int | None = None  # a first step that computed prompt positions here gives it
    logits = None
    if not plan.computed:
        first, logits = clean_first, clean.first_logits
        if plan.processed != plan.prompt:
            logits = prefill_logits(model, plan.processed, chunk)
            first = int(logits.argmax().item())
            forwarded += len(plan.processed)
    if plan.stepwise or first is None:
        dirty = decode_stepwise(model, plan, first, store, chunk, expected, logits, temperature)
    else:
        dirty = decode_with_evidence(
            model,
            plan.writers,
            plan.slots,
            first,
            plan.n_out,
            store,
            chunk,
            expected,
            logits,
            temperature,
        )
    evidence = None
    if dirty.scores is not None and clean.scores is not None:
        evidence = weigh(dirty.scores, clean.scores, temperature)
    return Replayed(
        dirty.tokens,
        clean.tokens,
        dirty.writer_share,
        dirty.uninitialised_share,
        forwarded + dirty.forwarded_tokens,
        evidence,
    )


def replay_suspect(con: duckdb.DuckDBPyConnection, model: Any, request_id: str) -> SuspectResult:
    """Plan, replay and judge one suspect; failures become cannot-replay with the reason."""
    try:
        plan = plan_suspect(con, request_id)
    except ReplayError as exc:
        return SuspectResult(request_id, Verdict.CANNOT_REPLAY, str(exc))
    return run_planned(model, plan, WriterStore())


def run_planned(
    model: Any, plan: SuspectPlan, store: WriterStore, shape: memory.Shape | None = None
) -> SuspectResult:
    """Check the plan against the model's vocabulary and the free memory, then replay and
    judge it; anything that stops it becomes cannot-replay with the reason."""
    started = time.perf_counter()
    result = _planned_result(plan)
    shape = shape or memory.model_shape(model)
    problem = _beyond_vocabulary(plan, shape.vocab)
    budget = None if problem else _memory_plan(model, plan, shape, store)
    if budget is not None and not budget.fits:
        problem = f"does not fit in memory: {budget.reason()}"
    if problem:
        result.reason = problem
        return result
    try:
        replayed = replay_plan(model, plan, store, budget.chunk if budget else None)
    except ReplayError as exc:
        result.verdict, result.reason = Verdict.CANNOT_REPLAY, str(exc)
        return result
    except (MemoryError, RuntimeError) as exc:
        if not is_out_of_memory(exc):
            raise
        store.release()
        _free_memory()
        result.verdict, result.reason = (
            Verdict.CANNOT_REPLAY,
            f"out of memory: {exc}".splitlines()[0],
        )
        return result
    result.verdict, result.reason, result.basis = judge(plan, replayed)
    _fill(result, plan, replayed, time.perf_counter() - started)
    return result


def _beyond_vocabulary(plan: SuspectPlan, vocab: int) -> str:
    """The reason when a token id of the suspect or its writers is beyond the vocabulary."""
    top = max(
        (max(t) for t in (plan.prompt, plan.processed, *plan.writers.values()) if t), default=0
    )
    if top < vocab:
        return ""
    return (
        f"token id {top} is beyond the model's vocabulary ({vocab} ids): the case was "
        "served by a different model; pass the served model with --model"
    )


def _memory_plan(
    model: Any, plan: SuspectPlan, shape: memory.Shape, store: WriterStore
) -> memory.MemoryPlan:
    """The suspect's memory plan; kept writers are dropped first when it would not fit."""
    context = max(len(plan.slots), len(plan.prompt))
    budget = memory.plan(model, shape, context, writer_span(plan), plan.n_out)
    if not budget.fits and store.kept:
        store.release()
        _free_memory()
        budget = memory.plan(model, shape, context, writer_span(plan), plan.n_out)
    return budget


def writer_span(plan: SuspectPlan) -> int:
    """The most positions of one writer the suspect's replays rebuild (its prompt included)."""
    return max([len(plan.prompt), *(n for needed in plan.rebuilds() for n in needed.values())])


def writer_uses(plans: Sequence[SuspectPlan]) -> tuple[dict[str, int], dict[str, int]]:
    """Per writer token sequence (token_digest): how many suspects rebuild it, and the most
    positions any of them needs."""
    uses: dict[str, int] = {}
    lengths: dict[str, int] = {}
    for plan in plans:
        for needed in plan.rebuilds():
            for writer, count in needed.items():
                key = token_digest(plan.writers[writer])
                uses[key] = uses.get(key, 0) + 1
                lengths[key] = max(lengths.get(key, 0), count)
    return uses, lengths


def _planned_result(plan: SuspectPlan) -> SuspectResult:
    delivered = (
        response_sha256(plan.delivered) if plan.delivered is not None else plan.delivered_sha256
    )
    return SuspectResult(
        plan.request_id,
        Verdict.CANNOT_REPLAY,
        "",
        delivered_sha256=delivered,
        decode_node=plan.decode_node,
        output_tokens=plan.n_out,
        foreign_slots=sum(plan.foreign.values()),
        uninitialised_slots=plan.uninitialised,
    )


def _fill(result: SuspectResult, plan: SuspectPlan, replayed: Replayed, seconds: float) -> None:
    result.contaminated_sha256 = response_sha256(replayed.contaminated)
    result.clean_sha256 = response_sha256(replayed.clean)
    result.tokens = replayed.forwarded
    result.seconds = round(seconds, 4)
    result.uninitialised_share = replayed.uninitialised_share if replayed.writer_share else None
    result.attention = {w: (replayed.writer_share.get(w), n) for w, n in plan.foreign.items()}
    result.evidence = replayed.evidence


def is_out_of_memory(exc: BaseException) -> bool:
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
    identity: Any = None  # forensics.replay.loader.ModelIdentity when loaded
    started_at: datetime | None = None
    finished_at: datetime | None = None
    run_id: str = ""
    kept_confirmed: list[str] = field(default_factory=list)  # confirmed earlier, kept
    model_matches: dict[str, bool] = field(default_factory=dict)

    @property
    def served_model(self) -> str:
        return self.identity.served_model if self.identity is not None else ""

    def counts(self) -> dict[Verdict, int]:
        out = {verdict: 0 for verdict in Verdict}
        for r in self.results:
            out[r.verdict] += 1
        return out


def replay_all(
    con: duckdb.DuckDBPyConnection,
    model_spec: str | None,
    device: str,
    request_ids: Sequence[str],
    progress: ProgressFn | None = None,
    missing_model: str = "no model given",
    device_map: str | None = None,
    served_model: str | None = None,
) -> ReplayRun:
    """Replay every suspect with one model. No model given: every suspect is cannot-replay with
    `missing_model` as the reason. A model that cannot be found raises UsageError."""
    from forensics.replay.loader import load
    from forensics.replay.testmodel import resolve_device

    started = datetime.now(UTC)
    if model_spec is None:
        reason = f"model not available: {missing_model}"
        return ReplayRun(
            "",
            resolve_device(device),
            [SuspectResult(r, Verdict.CANNOT_REPLAY, reason) for r in request_ids],
            started_at=started,
            finished_at=datetime.now(UTC),
        )
    loaded = load(model_spec, device, device_map, served_model)
    results = replay_loaded(con, loaded.model, request_ids, progress)
    return ReplayRun(
        model_spec,
        loaded.device,
        results,
        identity=loaded.identity,
        started_at=started,
        finished_at=datetime.now(UTC),
    )


def replay_loaded(
    con: duckdb.DuckDBPyConnection,
    model: Any,
    request_ids: Sequence[str],
    progress: ProgressFn | None = None,
) -> list[SuspectResult]:
    """Plan every suspect first (so that writers several suspects read are rebuilt once and
    kept while memory allows), then replay them in order."""
    plans: dict[str, SuspectPlan | str] = {}
    for request_id in request_ids:
        try:
            plans[request_id] = plan_suspect(con, request_id)
        except ReplayError as exc:
            plans[request_id] = str(exc)
    runnable = [p for p in plans.values() if isinstance(p, SuspectPlan)]
    shape = memory.model_shape(model)
    store = WriterStore(*writer_uses(runnable), keep_bytes=_keep_bytes(model, shape, runnable))
    results = []
    for done, request_id in enumerate(request_ids):
        if progress:
            progress(f"{request_id} ({done + 1}/{len(request_ids)})", done, len(request_ids))
        plan = plans[request_id]
        results.append(
            SuspectResult(request_id, Verdict.CANNOT_REPLAY, plan)
            if isinstance(plan, str)
            else run_planned(model, plan, store, shape)
        )
    if progress:
        progress("done", len(request_ids), len(request_ids))
    return results


def _keep_bytes(model: Any, shape: memory.Shape, plans: Sequence[SuspectPlan]) -> int:
    """Memory for kept writers: what is free beyond the largest suspect's own need."""
    if not plans:
        return 0
    free = memory.free_bytes(model)
    need = max(
        memory.plan(
            model, shape, max(len(p.slots), len(p.prompt)), writer_span(p), p.n_out, free
        ).need_bytes
        for p in plans
    )
    return max(0, free - need)
