"""`kvforensics probe URL`: canary requests against a live endpoint, and a live pool audit."""

from __future__ import annotations

import typer

from forensics.cli.app import app, command_line, console, emit_json
from forensics.cli.params import (
    ApiKeyEnv,
    Concurrency,
    ContextLen,
    DryRun,
    Json,
    MaxRequests,
    MaxTokens,
    Out,
    ProbeApi,
    ProbeModel,
    ProbeUrl,
    Timeout,
    TtftFactor,
)
from forensics.probe import stage
from forensics.probe.plan import describe
from forensics.probe.stage import ProbeOptions, ProbeResult


@app.command()
def probe(
    url: ProbeUrl,
    out: Out,
    api: ProbeApi = ProbeOptions.api,
    model: ProbeModel = ProbeOptions.model,
    api_key_env: ApiKeyEnv = ProbeOptions.api_key_env,
    max_requests: MaxRequests = ProbeOptions.max_requests,
    max_tokens: MaxTokens = ProbeOptions.max_tokens,
    concurrency: Concurrency = ProbeOptions.concurrency,
    context_len: ContextLen = ProbeOptions.context_len,
    timeout: Timeout = ProbeOptions.timeout,
    ttft_factor: TtftFactor = ProbeOptions.ttft_factor,
    dry_run: DryRun = False,
    json_out: Json = False,
) -> None:
    """Send canary-marked probe requests to a live OpenAI-compatible endpoint and look for one
    probe's markers in another's response; audit the engine's KV pool against its context.

    Exit 0 clean, 1 a foreign marker, a stub sign or a pool shortfall found, 2 could not run."""
    options = ProbeOptions(
        out=out,
        api=api,
        model=model,
        api_key_env=api_key_env,
        max_requests=max_requests,
        max_tokens=max_tokens,
        concurrency=concurrency,
        context_len=context_len,
        timeout=timeout,
        ttft_factor=ttft_factor,
        dry_run=dry_run,
        command=command_line(),
    )
    result = stage.run_probe(url, options, say=lambda line: console.print(line, markup=False))
    if json_out:
        emit_json(stage.result_json(result, options) if not result.dry_run else _plan(result))
    elif result.dry_run:
        for line in [*describe(result.plan, result.endpoint), *result.notes]:
            console.print(line, markup=False)
    else:
        _summary(result)
    raise typer.Exit(result.exit_code)


def _plan(result: ProbeResult) -> dict[str, object]:
    return {"dry_run": True, "plan": describe(result.plan, result.endpoint), "notes": result.notes}


def _summary(result: ProbeResult) -> None:
    audit = result.audit
    console.print(f"KV pool: {audit.reason}", markup=False)
    for f in result.findings:
        who = f" {f.receiver}" if f.receiver else ""
        src = f" <- {f.source}" if f.source else ""
        console.print(f"finding {f.kind}{who}{src}: {f.detail}", markup=False)
    answered = sum(1 for o in result.outcomes if o.status == 200 and o.error is None)
    verdict = f"{len(result.findings)} finding(s)" if result.findings else "clean"
    console.print(
        f"{answered}/{len(result.outcomes)} probes answered; {verdict}; "
        f"manifest.json SHA-256 {result.manifest_sha256}",
        markup=False,
    )
