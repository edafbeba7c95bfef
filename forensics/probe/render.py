"""probe.html from templates/probe.html: a typed context built from result.json's payload
(marker ids, request ids and figures; never a prompt or a response)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forensics.report.render import environment


@dataclass(frozen=True)
class FindingRow:
    kind: str
    receiver: str
    source: str
    markers: str
    longest_run: str
    detail: str


@dataclass(frozen=True)
class ProbeRow:
    request_id: str
    kind: str
    http_status: int
    sent_tokens: str
    prompt_tokens: str
    completion_tokens: str
    cached_tokens: str
    ttft_ms: str
    error: str


@dataclass(frozen=True)
class PageContext:
    url: str
    model: str
    engine: str
    verdict: str
    exit_code: int
    pool_tokens: str
    context_len: str
    pool_ratio: str
    pool_reason: str
    pool_source: str
    tag: str
    api: str
    concurrency: int
    tokens_in_flight: int
    findings: list[FindingRow]
    probes: list[ProbeRow]
    notes: list[str]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def page_context(payload: dict[str, Any]) -> PageContext:
    end, pool, plan = payload["endpoint"], payload["pool_audit"], payload["plan"]
    findings = [
        FindingRow(
            f["kind"],
            _text(f["receiver"]),
            _text(f["source"]),
            ", ".join(f["markers"]),
            _text(f["longest_run"]),
            f["detail"],
        )
        for f in payload["findings"]
    ]
    probes = [
        ProbeRow(
            p["request_id"],
            p["kind"],
            p["http_status"],
            _text(p["sent_tokens"]),
            _text(p["prompt_tokens"]),
            _text(p["completion_tokens"]),
            _text(p["cached_tokens"]),
            "" if p["ttft_s"] is None else f"{p['ttft_s'] * 1000:.1f}",
            _text(p["error"]),
        )
        for p in payload["probes"]
    ]
    return PageContext(
        payload["url"],
        end["model"],
        _text(end["engine"]) or "unknown",
        payload["verdict"],
        payload["exit_code"],
        _text(pool["pool_tokens"]) or "not published",
        _text(pool["context_len"]) or "not advertised",
        _text(pool["ratio"]),
        pool["reason"],
        pool["source"],
        plan["tag"],
        plan["api"],
        plan["concurrency"],
        plan["tokens_in_flight"],
        findings,
        probes,
        list(payload["notes"]),
    )


def render_page(payload: dict[str, Any]) -> str:
    """The page, with the report's template environment (autoescape on)."""
    return environment().get_template("probe.html").render(p=page_context(payload))
