"""One probe run: discover the endpoint, plan, send, check, and write the result folder
(result.json, requests.csv and accounts.csv as a case's gateway log, probe.html, manifest.json
with the SHA-256 of every file written, and its own SHA-256 beside it)."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from forensics.base.manifest import (
    anchor,
    build_manifest,
    custody,
    output_files,
    utc_now,
    write_manifest,
)
from forensics.errors import UsageError
from forensics.probe import check
from forensics.probe.client import EndpointError, Outcome, base_url, discover, send
from forensics.probe.plan import (
    Api,
    Endpoint,
    Plan,
    Probe,
    make_plan,
    new_tag,
    text_words,
    token_prompt,
)
from forensics.probe.render import render_page

WRITTEN = ("result.json", "requests.csv", "accounts.csv", "probe.html")
KNOWN = frozenset({*WRITTEN, "manifest.json", "manifest.json.sha256"})
REQUEST_COLUMNS = (
    "request_id account_id model received_at first_token_at completed_at http_status "
    "prompt_tokens completion_tokens cached_tokens"
).split()

Say = Callable[[str], None]
REQUEST_TIMEOUT_FLOOR_S = 30.0  # a request's own limit: a quarter of --timeout, at least this


@dataclass(frozen=True)
class ProbeOptions:
    """`kvforensics probe`: what is sent and where the result goes."""

    out: Path | None = None
    api: Api = Api.TOKENS
    model: str | None = None  # the served model's name (default: the first /v1/models lists)
    api_key_env: str | None = None  # the environment variable holding the API key
    max_requests: int = 24
    max_tokens: int = 16
    concurrency: int = 0  # 0: enough to need more than the pool
    context_len: int = 0  # 0: the advertised one
    timeout: float = 300.0  # seconds for the whole run
    ttft_factor: float = 10.0
    dry_run: bool = False
    command: tuple[str, ...] = ()

    def parameters(self) -> dict[str, Any]:
        """For the manifest: the options, never the key (only the variable's name)."""
        kept = asdict(self)
        kept.pop("command")
        kept["out"] = str(self.out) if self.out else None
        kept["api"] = self.api.value
        return kept


@dataclass
class ProbeResult:
    endpoint: Endpoint
    plan: Plan
    notes: list[str]
    audit: check.PoolAudit
    outcomes: list[Outcome] = field(default_factory=list)
    findings: list[check.Finding] = field(default_factory=list)
    dry_run: bool = False
    manifest_sha256: str | None = None

    @property
    def exit_code(self) -> int:
        return 1 if self.findings else 0


def api_key(env: str | None) -> str | None:
    if not env:
        return None
    value = os.environ.get(env)
    if not value:
        raise UsageError(f"--api-key-env {env}: the environment variable {env} is not set")
    return value


def check_out(out: Path | None) -> Path:
    """OUT, checked before anything is sent: a folder holding nothing but an earlier probe's
    files (they are replaced)."""
    if out is None:
        raise UsageError("give the result folder with --out DIR")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a folder (it is created if missing)")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in KNOWN)
        if foreign:
            raise UsageError(
                f"--out {out} holds files that probe did not write ({', '.join(foreign[:5])}); "
                "give an empty or new folder"
            )
    out.mkdir(parents=True, exist_ok=True)
    return out


DRY_RUN_CONTEXT = 4096  # a dry run's context when the endpoint cannot be asked nor one is given


def unread_endpoint(
    root: str, options: ProbeOptions, exc: EndpointError
) -> tuple[Endpoint, list[str]]:
    """A dry run's stand-in for an endpoint it could not ask: the plan then assumes the
    context given with --context-len (else DRY_RUN_CONTEXT) and no published pool."""
    context = options.context_len or DRY_RUN_CONTEXT
    note = (
        f"could not ask the endpoint what it is ({exc}); this plan assumes a context of "
        f"{context} tokens ({'--context-len' if options.context_len else 'give --context-len'}) "
        "and no published KV pool; a run reads both from the endpoint first, and exits 2 "
        "while it cannot reach it"
    )
    name = options.model or "(not read)"
    return Endpoint(root, name, context, None, None, None, "not read"), [note]


def run_probe(url: str, options: ProbeOptions, say: Say | None = None) -> ProbeResult:
    """Discover, plan and (unless dry_run) send, check and write OUT."""
    tell = say or (lambda _line: None)
    root = base_url(url)
    key = api_key(options.api_key_env)
    deadline = time.monotonic() + options.timeout
    try:
        endpoint, notes = discover(root, key, options.model, min(options.timeout, 30.0))
    except EndpointError as exc:
        if not options.dry_run:
            raise
        endpoint, notes = unread_endpoint(root, options, exc)
    plan = make_plan(
        endpoint,
        new_tag(),
        options.api,
        options.max_requests,
        options.max_tokens,
        options.concurrency or None,
        options.context_len or None,
    )
    result = ProbeResult(endpoint, plan, notes, check.pool_audit(endpoint))
    if options.dry_run:
        result.dry_run = True
        return result
    out = check_out(options.out)
    started = utc_now()
    prompts = {p.index: _prompt(plan, p) for p in plan.probes}
    cap = max(REQUEST_TIMEOUT_FLOOR_S, options.timeout / 4)
    result.outcomes = _send_all(endpoint, plan, prompts, key, (deadline, cap), tell)
    answered = [o for o in result.outcomes if o.status == 200 and o.error is None]
    if not answered:
        first = next((o.error for o in result.outcomes if o.error), "no request was sent")
        raise EndpointError(f"{root}: no probe request was answered ({first})")
    items = {i: (p if isinstance(p, list) else p.split()) for i, p in prompts.items()}
    page = endpoint.page_size or plan.page_size
    result.findings = [
        *check.shortfall(result.audit),
        *check.foreign_markers(plan, items, result.outcomes),
        *check.stub_signs(plan, result.outcomes, options.ttft_factor, page),
    ]
    result.manifest_sha256 = _write(out, result, options, started)
    return result


def _prompt(plan: Plan, probe: Probe) -> list[int] | str:
    if plan.api == Api.TOKENS:
        return token_prompt(plan.tag, probe)
    return " ".join(text_words(plan.tag, probe))


def _send_all(
    endpoint: Endpoint,
    plan: Plan,
    prompts: dict[int, list[int] | str],
    key: str | None,
    limits: tuple[float, float],
    tell: Say,
) -> list[Outcome]:
    """Every probe, `plan.concurrency` at a time, in plan order, each given at most the
    per-request cap (limits[1] s, so that a request the engine never answers does not hold the
    run); those not started before the deadline (limits[0], monotonic) are left out."""
    deadline, cap = limits
    done: list[Outcome] = []

    def one(probe: Probe) -> Outcome:
        left = deadline - time.monotonic()
        if left <= 0:
            return Outcome(probe.index, error="not sent: --timeout reached")
        got = send(endpoint, plan.api, probe, prompts[probe.index], key, min(left, cap))
        done.append(got)
        state = "ok" if got.error is None else got.error
        tell(f"probe {len(done)}/{len(plan.probes)}: {probe.request_id} {probe.kind} {state}")
        return got

    with ThreadPoolExecutor(max_workers=plan.concurrency) as pool:
        return list(pool.map(one, plan.probes))


def engine_request_id(endpoint: Endpoint, api: Api, probe: Probe, outcome: Outcome) -> str:
    """The id the engine's ledger has for the probe: vLLM runs a completion's prompt as
    `<response id>-0` (`cmpl-<X-Request-Id>-0`) and a chat as its response id; other engines
    as the response id, else the X-Request-Id sent."""
    rid = outcome.response_id or probe.request_id
    if endpoint.engine == "vllm" and api != Api.CHAT and outcome.response_id:
        return f"{rid}-0"
    return rid


def _iso(t: float | None) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="microseconds") if t else ""


def request_rows(result: ProbeResult) -> list[dict[str, Any]]:
    """requests.csv: the probes in the project's request-log contract, one account each."""
    rows = []
    for probe, out in zip(result.plan.probes, result.outcomes, strict=True):
        rows.append(
            {
                "request_id": engine_request_id(result.endpoint, result.plan.api, probe, out),
                "account_id": probe.account,
                "model": result.endpoint.model,
                "received_at": _iso(out.received_at),
                "first_token_at": _iso(out.first_token_at),
                "completed_at": _iso(out.completed_at),
                "http_status": out.status,
                "prompt_tokens": out.prompt_tokens
                if out.prompt_tokens is not None
                else (out.sent_tokens or ""),
                "completion_tokens": "" if out.completion_tokens is None else out.completion_tokens,
                "cached_tokens": "" if out.cached_tokens is None else out.cached_tokens,
            }
        )
    return rows


def result_json(result: ProbeResult, options: ProbeOptions) -> dict[str, Any]:
    """result.json: figures, marker ids and request ids; no prompt or response content."""
    probes = []
    for probe, out in zip(result.plan.probes, result.outcomes, strict=True):
        probes.append(
            {
                **asdict(probe),
                "engine_request_id": engine_request_id(
                    result.endpoint, result.plan.api, probe, out
                ),
                "http_status": out.status,
                "error": out.error,
                "ttft_s": None if out.ttft_s is None else round(out.ttft_s, 6),
                "sent_tokens": out.sent_tokens,
                "prompt_tokens": out.prompt_tokens,
                "completion_tokens": out.completion_tokens,
                "cached_tokens": out.cached_tokens,
            }
        )
    pairs = sorted({(f.receiver, f.source) for f in result.findings if f.kind == check.FOREIGN})
    return {
        "url": result.endpoint.url,
        "endpoint": asdict(result.endpoint),
        "pool_audit": asdict(result.audit),
        "plan": {
            "tag": result.plan.tag,
            "api": result.plan.api.value,
            "requests": len(result.plan.probes),
            "concurrency": result.plan.concurrency,
            "longest_prompt": result.plan.longest,
            "tokens_in_flight": result.plan.tokens_in_flight,
        },
        "parameters": options.parameters(),
        "notes": result.notes,
        "probes": probes,
        "findings": [asdict(f) for f in result.findings],
        "pairs": [{"receiver": r, "source": s} for r, s in pairs],
        "verdict": "findings" if result.findings else "clean",
        "exit_code": result.exit_code,
    }


def _write(out: Path, result: ProbeResult, options: ProbeOptions, started: str) -> str:
    for name in KNOWN:
        (out / name).unlink(missing_ok=True)
    payload = result_json(result, options)
    (out / "result.json").write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    with open(out / "requests.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=REQUEST_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(request_rows(result))
    accounts = "".join(f"{p.account},{p.request_id}\n" for p in result.plan.probes)
    (out / "accounts.csv").write_text("account_id,name\n" + accounts, encoding="utf-8")
    (out / "probe.html").write_text(render_page(payload), encoding="utf-8")
    manifest = build_manifest(
        case_dir=result.endpoint.url,
        inputs=[],
        skipped=[],
        params=options.parameters(),
        stages={"probe": {"requests": len(result.outcomes), "findings": len(result.findings)}},
        outputs=output_files(out),
        queries={},
        started_at=started,
        finished_at=utc_now(),
        command=list(options.command),
        custody=custody(),
    )
    return anchor(write_manifest(out / "manifest.json", manifest))
