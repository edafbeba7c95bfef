"""`kvforensics simulate`: write a simulated incident case folder with its ground truth."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import typer

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.progress import progress_reporter
from forensics.errors import UsageError


def _parse_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(
            f"--fixed-at '{value}' is not an ISO-8601 time; try --fixed-at 2026-09-05T00:00:00Z"
        ) from exc
    if t.tzinfo is None:
        raise UsageError(f"--fixed-at '{value}' has no offset; add Z or +00:00")
    return t


@app.command()
def simulate(
    out_dir: Path = typer.Argument(
        ..., help="Case folder to create (replaced if it is a simulated case folder)."
    ),
    requests: int = typer.Option(500, "--requests", help="Number of requests to simulate."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same seed gives the same files."),
    scale: float = typer.Option(
        1.0,
        "--scale",
        help="Shrink every size (context, pools, "
        "lengths) by this factor, e.g. 0.001 for a small sample.",
    ),
    bug: list[str] = typer.Option(
        None,
        "--bug",
        help="Engine bug to switch on (repeatable): "
        "oversize-stub, late-transfer, double-alloc, prefix-collision, "
        "or none. Default: oversize-stub (the incident).",
    ),
    fixed_at: str = typer.Option(
        None, "--fixed-at", help="ISO time after which over-long prompts are refused with HTTP 400."
    ),
    days: float = typer.Option(14.0, "--days", help="Length of the traffic window in days."),
    no_truth: bool = typer.Option(
        False,
        "--no-truth",
        help="Skip ground_truth/ and the "
        "read sweep (also skips contents.jsonl and response hashes).",
    ),
    no_contents: bool = typer.Option(False, "--no-contents", help="Do not write contents.jsonl."),
    model: str = typer.Option(
        "synthetic",
        "--model",
        help="Output model: synthetic (hash-based, default) or test (the replay test model).",
    ),
    allocator: str = typer.Option(
        "lifo",
        "--allocator",
        help="Page reuse: lifo (the simulator's own last-in-first-out pool), sglang (SGLang's "
        "real PagedTokenToKVPoolAllocator) or vllm (vLLM's real BlockPool); the last two run "
        "in the engines' environment (scripts/engines_venv.sh).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
) -> None:
    """Simulate a disaggregated SGLang cluster and write a case folder plus ground truth."""
    from forensics.simulate.config import check_bugs
    from forensics.simulate.run import SimOptions
    from forensics.simulate.run import simulate as run_simulation

    names = bug or ["oversize-stub"]
    bugs = frozenset() if names == ["none"] else check_bugs(names)
    opts = SimOptions(
        requests=requests,
        seed=seed,
        scale=scale,
        bugs=bugs,
        fixed_at=_parse_time(fixed_at),
        truth=not no_truth,
        contents=not no_contents,
        model=model,
        days=days,
        allocator=allocator,
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
