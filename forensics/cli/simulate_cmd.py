"""`kvforensics simulate`: write a simulated incident case folder with its ground truth."""

from __future__ import annotations

from forensics.base.isotime import option_time
from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import (
    Bugs,
    Days,
    FixedAt,
    Json,
    NoContents,
    NoTruth,
    PromptWords,
    Requests,
    Scale,
    SimModel,
    SimOut,
    SimPool,
    SimSample,
    SimSeed,
)
from forensics.cli.progress import progress_reporter
from forensics.options import Bug, OutputModel, SimAllocator, SimOptions, SimSampling


@app.command()
def simulate(
    out_dir: SimOut,
    requests: Requests = SimOptions.requests,
    seed: SimSeed = SimOptions.seed,
    scale: Scale = SimOptions.scale,
    bug: Bugs = None,
    fixed_at: FixedAt = None,
    days: Days = SimOptions.days,
    no_truth: NoTruth = not SimOptions.truth,
    no_contents: NoContents = not SimOptions.contents,
    model: SimModel = OutputModel(SimOptions.model),
    sampling: SimSample = SimSampling(SimOptions.sampling),
    prompt_words: PromptWords = 0,
    allocator: SimPool = SimAllocator(SimOptions.allocator),
    json_out: Json = False,
) -> None:
    """Simulate a disaggregated SGLang cluster and write a case folder plus ground truth."""
    from forensics.simulate.run import simulate as run_simulation

    chosen = {b.value for b in bug} if bug else SimOptions.bugs
    opts = SimOptions(
        requests=requests,
        seed=seed,
        scale=scale,
        bugs=frozenset(chosen - {Bug.NONE.value}),
        fixed_at=option_time(fixed_at, "--fixed-at", "2026-09-05T00:00:00Z") if fixed_at else None,
        truth=not no_truth,
        contents=not no_contents,
        model=model.value,
        sampling=sampling.value,
        days=days,
        allocator=allocator.value,
        overrides=(("prompt_words", prompt_words),) if prompt_words else (),
    )
    with progress_reporter(console, "simulate") as progress:
        summary = run_simulation(out_dir, opts, progress)
    if json_out:
        emit_json(summary)
    else:
        console.print(
            f"wrote {out_dir}: {summary['requests']} requests, "
            f"{summary['events']} KV events ({summary['events_per_second']} events/s), "
            f"{summary['stubs']} stubbed over-long prompts"
        )
        if "exposure_runs" in summary:
            console.print(
                f"ground truth: {summary['exposure_runs']} exposure runs, "
                f"{summary['violation_runs']} violation runs, "
                f"{summary['cross_account_tokens']} cross-account tokens"
            )
    finish(False)
