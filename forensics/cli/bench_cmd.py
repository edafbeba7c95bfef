"""`kvforensics bench`: the scale benchmark, or with --replay the replay speed table."""

from __future__ import annotations

from rich.table import Table

from forensics.bench.pair import PairResult, run_pair
from forensics.bench.run import BenchOptions, BenchResult, run_bench
from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import (
    BenchMix,
    BenchReplay,
    BenchSeed,
    Contexts,
    Events,
    Json,
    Keep,
    Leakers,
    LedgerExternal,
    LedgerLoad,
    MemoryLimit,
    Naive,
    Repeat,
    ReplayOn,
    SpeedModel,
    Workdir,
    WriteFloor,
)
from forensics.cli.progress import progress_reporter
from forensics.options import Device, Mix
from forensics.replay import SpeedOptions
from forensics.replay.verdicts import Verdict


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
    ledger_load: LedgerLoad = BenchOptions.ledger_load,
    write_floor: WriteFloor = BenchOptions.write_floor,
    repeat: Repeat = BenchOptions.repeat,
    replay: BenchReplay = False,
    model: SpeedModel = SpeedOptions.model,
    device: ReplayOn = Device.AUTO,
    contexts: Contexts = SpeedOptions.contexts,
    leakers: Leakers = SpeedOptions.leakers,
    json_out: Json = False,
) -> None:
    """Time ingest and analysis on a simulated ledger of N events, beside the scan floor (for
    the analysis) and the read floor (for ingest). The ledger is written as the tap writes it
    (Parquet parts in node=NAME/ folders) and ingest reads it in place, as it does by default;
    with --ledger-load, ingest loads it into the case database. With --replay, time replay
    against the model's own prefill speed instead."""
    run_chosen(
        BenchOptions(
            events,
            mix.value,
            seed,
            memory_limit,
            workdir,
            keep,
            naive=naive,
            ledger_external=ledger_external,
            ledger_load=ledger_load,
            write_floor=write_floor,
            repeat=repeat,
        ),
        SpeedOptions(model, contexts, leakers),
        device,
        replay,
        json_out,
    )


def run_chosen(
    options: BenchOptions, speed_options: SpeedOptions, device: Device, replay: bool, json_out: bool
) -> None:
    """The scale benchmark, or with `replay` the replay speed table (each ignores the other's
    options)."""
    if replay:
        _replay_speed(speed_options, device, json_out)
        return
    with progress_reporter(console, "bench") as progress:
        both = options.mix == Mix.BOTH.value
        result = run_pair(options, progress) if both else run_bench(options, progress)
    if isinstance(result, PairResult):
        _print_pair(result, json_out)
    elif json_out:
        emit_json(result.to_json())
    else:
        _print(result)


def _print_pair(pair: PairResult, json_out: bool) -> None:
    data = pair.to_json()
    if json_out:
        emit_json(data)
        return
    _print(pair.short)
    _print(pair.long)
    rounds = ", ".join(f"{r:.2f}" for r in data["long_over_short_rounds"])
    console.print(
        f"long mix over short mix, analysis per event: {data['long_over_short_per_event']}x "
        f"(CPU {data['long_over_short_per_event_cpu']}x; the median of {data['repeat']} "
        f"round(s): {rounds})",
        markup=False,
    )


def _print(result: BenchResult) -> None:
    data = result.to_json()
    runs = f", median of {data['repeat']} analyses" if data["repeat"] > 1 else ""
    table = Table(title=f"bench: {data['events']:,} events, {data['mix']} mix{runs}")
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


def _replay_speed(options: SpeedOptions, device: Device, json_out: bool) -> None:
    """Rows print as they are measured (phases on stderr); exit 1 when a row's replay did not
    confirm its stub suspect."""
    import io
    import sys

    from forensics.replay import speed
    from forensics.replay.stage import require_replay

    options.leaker_list()  # usage errors before the model is built
    require_replay()
    captured = io.StringIO()
    rows = speed.run(options, device.value, captured if json_out else sys.stdout, sys.stderr)
    if json_out:
        title = captured.getvalue().splitlines()[0]
        emit_json({"title": title, "rows": [speed.as_json(r) for r in rows]})
    finish(any(r.verdict != Verdict.CONFIRMED for r in rows))
