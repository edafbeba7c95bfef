"""The verdict on a replayed suspect (DESIGN.md §5), when its decode read another request's
data: `confirmed` on one of two grounds (`basis`): `reproduced`, the contaminated replay's greedy
decoding reproduces the delivered output (by token ids, or by response_sha256 when the ids were
not kept) and the clean one does not; or `evidence`, the delivered token ids, scored
teacher-forced, are at least THRESHOLD_BITS more likely (log-likelihood ratio,
forensics.replay.evidence) under the KV it read than under its own prompt, and plausible there.
`not-reproduced` otherwise, with the figure. The replays themselves run in
forensics.replay.replay."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from forensics.replay.evidence import THRESHOLD_BITS, Evidence
from forensics.replay.ledger import SuspectPlan
from forensics.replay.verdicts import Basis, Verdict


def response_sha256(tokens: Sequence[int]) -> str:
    """Hex SHA-256 of the ','-joined decimal token ids (the request log's response_sha256)."""
    return hashlib.sha256(",".join(str(int(t)) for t in tokens).encode("ascii")).hexdigest()


@dataclass
class Replayed:
    """The two replays of one suspect."""

    contaminated: list[int]
    clean: list[int]
    writer_share: dict[str, float]
    uninitialised_share: float
    forwarded: int
    evidence: Evidence | None = None


def judge(plan: SuspectPlan, replayed: Replayed) -> tuple[Verdict, str, Basis | None]:
    """(verdict, reason, basis of a confirmation) for a suspect whose replays ran."""
    dirty_ok = _reproduces(plan, replayed.contaminated)
    clean_ok = _reproduces(plan, replayed.clean)
    foreign = plan.foreign
    evidence = replayed.evidence
    read = (
        f"({sum(foreign.values())} positions of {len(foreign)} other request(s))" if foreign else ""
    )
    if dirty_ok and not clean_ok and foreign:
        return (
            Verdict.CONFIRMED,
            f"the replay from the KV it read {read} reproduces the delivered output; "
            "the clean replay does not" + _figure(evidence),
            Basis.REPRODUCED,
        )
    if clean_ok:
        return (
            Verdict.NOT_REPRODUCED,
            "the clean replay from its own prompt also reproduces the output"
            if dirty_ok
            else "the clean replay from its own prompt reproduces the delivered output; the "
            f"replay from the KV it read does not{_first_difference(plan, replayed.contaminated)}",
            None,
        )
    if not foreign:
        return (
            Verdict.NOT_REPRODUCED,
            f"its decode read no other request's data ({plan.uninitialised} "
            "never-written positions, replayed as zeros): no leak to confirm" + _figure(evidence),
            None,
        )
    if evidence is None:
        return (
            Verdict.NOT_REPRODUCED,
            "the replay from the KV it read does not reproduce the delivered "
            f"output{_first_difference(plan, replayed.contaminated)}",
            None,
        )
    if evidence.strong and evidence.plausible:
        return (
            Verdict.CONFIRMED,
            f"the delivered output is far more likely under the KV it read {read} than under "
            f"its own prompt: {evidence.summary()}; {evidence.fit()}",
            Basis.EVIDENCE,
        )
    if evidence.strong:
        why = (
            "the delivered output is more likely under the KV it read than under its own "
            f"prompt, but implausible even there ({evidence.fit()}): the rebuilt KV may not be "
            "what it read"
        )
    elif evidence.bits < 0:
        why = "the delivered output is more likely under its own prompt than under the KV it read"
    else:
        why = f"the evidence is too weak (confirmation needs {THRESHOLD_BITS:g} bits)"
    return Verdict.NOT_REPRODUCED, f"{why}: {evidence.summary()}", None


def _figure(evidence: Evidence | None) -> str:
    return "" if evidence is None else f" ({evidence.bits:+.1f} bits)"


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
