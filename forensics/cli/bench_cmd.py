"""`kvforensics bench`: the scale benchmark."""

from __future__ import annotations

from rich.table import Table

from forensics.bench.run import BenchOptions, BenchResult, run_bench
from forensics.cli.app import app, console, emit_json
from forensics.cli.params import (
    BenchMix,
    BenchSeed,
    Events,
    Json,
    Keep,
    LedgerExternal,
    MemoryLimit,
    Naive,
    Workdir,
)
from forensics.cli.progress import progress_reporter
from forensics.options import Mix


@app.command()
def bench(
    events: Events = BenchOptions.events,
    mix: BenchMix = Mix(BenchOptions.mix),
    seed: BenchSeed = BenchOptions.seed,
    memory_limit: MemoryLimit = BenchOptions.memory_limit,
    workdir: Workdir = BenchOptions.workdir,
    keep: Keep = BenchOptions.keep,
    naive: Naive = BenchOptions.naive,
    ledger_external: LedgerExternal = BenchOptions.ledger_external,
    json_out: Json = False,
) -> None:
    """Time ingest and analysis on a simulated ledger of N events, beside the scan floor (for
    the analysis) and the read floor (for ingest); with --ledger-external, ingest keeps the
    ledger outside the case database."""
    options = BenchOptions(
        events,
        mix.value,
        seed,
        memory_limit,
        workdir,
        keep,
        naive=naive,
        ledger_external=ledger_external,
    )
    with progress_reporter(console, "bench") as progress:
        result = run_bench(options, progress)
    if json_out:
        emit_json(result.to_json())
    else:
        _print(result)


def _print(result: BenchResult) -> None:
    data = result.to_json()
    table = Table(title=f"bench: {data['events']:,} events, {data['mix']} mix")
    for name in ("stage", "wall s", "events/s", "cores busy", "peak MB", "note"):
        table.add_column(name, justify="left" if name in ("stage", "note") else "right")
    for name, m in result.stages.items():
        rate = f"{result.events / m.seconds:,.0f}" if m.seconds and not m.error else ""
        table.add_row(
            name,
            f"{m.seconds:.2f}",
            rate,
            f"{m.cores_busy:.2f}",
            f"{m.peak_rss_mb:,.0f}",
            m.error or "",
        )
    console.print(table)
    console.print(
        f"ingest + analysis: {data['total_s']} s; analysis / scan floor: "
        f"{data['analyze_over_floor']}x; ingest / read floor: "
        f"{data['ingest_over_read_floor']}x; {data['analyze_us_per_event']} us per event "
        f"analysed; peak memory {data['peak_rss_mb']:,.0f} MB",
        markup=False,
    )
    agrees = result.naive_agrees()
    if agrees is not None:
        console.print(
            "naive per-slot check: "
            + (
                "read_stats, exposure_tokens and exposures agree exactly"
                if agrees
                else "DIFFERENCES found (see the notes)"
            ),
            markup=False,
        )
    for note in result.notes:
        console.print(note, markup=False)
