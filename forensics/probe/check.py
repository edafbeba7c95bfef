"""The findings of a probe run: another probe's markers in a response, signs that a request ran
as a stub, and a KV pool smaller than the advertised context (the audit-logs verdict, from the
engine's live figures).

Findings name probes, marker ids and run lengths, never the tokens or text themselves."""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from forensics.logs.audit import Fact, NodeAudit, RunAudit
from forensics.probe.client import Outcome
from forensics.probe.plan import MARKER_LEN, Api, Endpoint, Plan, marker_id

FOREIGN = "foreign-marker"
FAST = "fast-first-token"
USAGE = "usage-mismatch"
CACHED = "cache-implausible"
SHORTFALL = "pool-shortfall"
_MARKER_WORD = re.compile(r"kvf([0-9a-f]{8})p(\d{3})m(\d{3})")
STUB_MIN_PAGES = 4  # a prompt shorter than this many pages is not timed for a stub
# Nor one whose prefill the median rate puts under this: scheduling noise is larger than that.
STUB_MIN_PREFILL_S = 0.1


@dataclass(frozen=True)
class Finding:
    kind: str
    receiver: str | None  # the request id of the probe whose response shows it
    source: str | None  # the probe whose marker it carried (foreign-marker)
    markers: tuple[str, ...]  # marker ids (pNNN.mNNN) found, foreign-marker only
    longest_run: int | None  # tokens (or words) in a row shared with the source's prompt
    detail: str


@dataclass(frozen=True)
class PoolAudit:
    pool_tokens: int | None
    context_len: int | None
    page_size: int | None
    ratio: float | None
    fits: bool | None
    reason: str
    source: str


def pool_audit(endpoint: Endpoint) -> PoolAudit:
    """audit-logs' verdict (forensics.logs.audit) on the engine's live figures."""
    facts = {}
    if endpoint.pool_tokens is not None:
        facts["pool_slots"] = Fact(endpoint.pool_tokens, None, None, endpoint.pool_source)
    if endpoint.context_len is not None:
        facts["context_len"] = Fact(endpoint.context_len, None, None, "/v1/models max_model_len")
    if endpoint.page_size is not None:
        facts["page_size"] = Fact(endpoint.page_size, None, None, endpoint.pool_source)
    run = RunAudit(0, None, facts)
    node = NodeAudit(endpoint.url, endpoint.engine, [], [run])
    return PoolAudit(
        endpoint.pool_tokens,
        endpoint.context_len,
        endpoint.page_size,
        run.ratio,
        node.fits,
        node.reason.replace("not found in the log", "not published by the endpoint"),
        endpoint.pool_source,
    )


def _runs(seq: Sequence[object]) -> list[tuple[object, ...]]:
    return [tuple(seq[i : i + MARKER_LEN]) for i in range(len(seq) - MARKER_LEN + 1)]


def run_index(prompts: Mapping[int, Sequence[object]]) -> dict[tuple[object, ...], tuple[int, int]]:
    """Every run of MARKER_LEN tokens (words) of every prompt: (probe, position)."""
    index: dict[tuple[object, ...], tuple[int, int]] = {}
    for probe, seq in prompts.items():
        for pos, run in enumerate(_runs(seq)):
            index.setdefault(run, (probe, pos))
    return index


def longest_run(a: Sequence[object], b: Sequence[object]) -> int:
    """The longest run of consecutive items found in both a and b."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
        best = max(best, *current)
        previous = current
    return best


def response_items(api: Api, outcome: Outcome) -> list[object]:
    """What a response is compared by: its token ids for token prompts, else its words."""
    if api == Api.TOKENS:
        return list(outcome.token_ids)
    return list(outcome.text.split())


def foreign_markers(
    plan: Plan, prompts: Mapping[int, Sequence[object]], outcomes: Sequence[Outcome]
) -> list[Finding]:
    """Responses that carry another probe's marker word or a run of its prompt."""
    index = run_index(prompts)
    ids = {p.index: p.request_id for p in plan.probes}
    found: list[Finding] = []
    for out in outcomes:
        items = response_items(plan.api, out)
        hits: dict[int, set[str]] = {}
        for run in _runs(items):
            where = index.get(run)
            if where is not None and where[0] != out.index:
                hits.setdefault(where[0], set()).add(marker_id(where[0], where[1] // MARKER_LEN))
        for tag, probe, marker in _MARKER_WORD.findall(out.text):
            if tag == plan.tag and int(probe) != out.index and int(probe) in ids:
                hits.setdefault(int(probe), set()).add(marker_id(int(probe), int(marker)))
        for source in sorted(hits):
            run_len = longest_run(items, prompts[source])
            markers = tuple(sorted(hits[source]))
            found.append(
                Finding(
                    FOREIGN,
                    ids[out.index],
                    ids[source],
                    markers,
                    run_len,
                    f"{len(markers)} marker(s) of {ids[source]}, {run_len} in a row",
                )
            )
    return found


def _sign(kind: str, receiver: str, detail: str) -> Finding:
    return Finding(kind, receiver, None, (), None, detail)


def stub_signs(
    plan: Plan, outcomes: Sequence[Outcome], ttft_factor: float, page: int
) -> list[Finding]:
    """A first token far too fast for the prompt, usage that does not match what was sent,
    and cached tokens beyond what the probes' prompts could share."""
    ids = {p.index: p.request_id for p in plan.probes}
    answered = [o for o in outcomes if o.status == 200 and o.error is None]
    found: list[Finding] = []
    timed = [
        (o, o.ttft_s, o.ttft_s / o.prompt_tokens)
        for o in answered
        if o.ttft_s is not None and o.prompt_tokens and o.prompt_tokens >= STUB_MIN_PAGES * page
    ]
    rate = statistics.median(r for _, _, r in timed) if len(timed) >= 3 else 0.0
    for o, ttft, r in timed:
        if r * ttft_factor < rate and rate * (o.prompt_tokens or 0) >= STUB_MIN_PREFILL_S:
            found.append(
                _sign(
                    FAST,
                    ids[o.index],
                    f"first token after {ttft:.3f} s for {o.prompt_tokens} prompt tokens: over "
                    f"{ttft_factor:g}x faster than the median prefill rate",
                )
            )
    cached = [o.cached_tokens for o in answered if o.cached_tokens is not None]
    shared = statistics.median(cached) if cached else 0
    for o in answered:
        rid = ids[o.index]
        if o.sent_tokens is not None and o.prompt_tokens not in (None, o.sent_tokens):
            detail = f"usage says {o.prompt_tokens} prompt tokens; {o.sent_tokens} were sent"
            found.append(_sign(USAGE, rid, detail))
        if o.token_ids and o.completion_tokens not in (None, len(o.token_ids)):
            got = len(o.token_ids)
            detail = f"usage says {o.completion_tokens} completion tokens; {got} came back"
            found.append(_sign(USAGE, rid, detail))
        if o.cached_tokens is not None and o.cached_tokens > shared + page:
            detail = (
                f"{o.cached_tokens} of {o.prompt_tokens} prompt tokens reported cached; no "
                "other probe shares its prompt"
            )
            found.append(_sign(CACHED, rid, detail))
    return found


def shortfall(audit: PoolAudit) -> list[Finding]:
    if audit.fits is not False:
        return []
    return [Finding(SHORTFALL, None, None, (), None, audit.reason)]
