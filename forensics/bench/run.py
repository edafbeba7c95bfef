"""`kvforensics bench`: make a ledger of about N events, then time ingest, analysis, the scan
floor and (where it fits in the time allowed) the naive per-slot approach.

With repeat > 1 the analysis and the scan floor are timed that many times each, alternating,
each in a fresh process, and the figures are those of the median runs: one run of each on a
busy machine can land minutes apart in its pace."""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.base.progress import ProgressFn, no_progress
from forensics.bench import stages
from forensics.bench.measure import Measured, measure
from forensics.errors import UsageError
from forensics.ledger.default import CASE_LEDGER
from forensics.options import Mix

PILOT_REQUESTS = 200
MAX_PILOT_REQUESTS = 20_000
# The naive per-slot check makes a row per slot of every event's range: about 0.56 to 0.72
# million such rows a second on 2 cores (18.1 M rows in 32 s, 30.1 M in 42 s), at about 4 GiB
# of DuckDB's memory. It is run only when its rows should be done within its time allowed, at
# a rate below that.
NAIVE_SLOT_ROWS_PER_S = 400_000


@dataclass(frozen=True)
class BenchOptions:
    events: int = 1_000_000  # about how many ledger events
    mix: str = Mix.SHORT.value
    seed: int = 7
    memory_limit: str | None = None
    workdir: Path | None = None
    keep: bool = False
    naive_timeout_s: float = 240.0  # the naive check runs when its slot rows fit this
    naive: bool = True
    # The simulated parts are moved into kv_events/node=NAME/ folders, the layout the tap
    # writes, and ingest reads them in place as it does by default for such a ledger (checked,
    # kept outside the case database); with ledger_load, ingest loads them into the case
    # database instead (`ingest --ledger-load`). ledger_external: the option that asked for the
    # in-place path explicitly (it takes no location here).
    ledger_external: str | None = None
    ledger_load: bool = False
    # Also time the write floor (stages.write_floor): the ledger written as it is into a new
    # database file in the case database's storage format.
    write_floor: bool = False
    repeat: int = 1  # times the analysis and the scan floor are each timed (median run kept)


@dataclass
class BenchResult:
    options: BenchOptions
    events: int = 0
    requests: int = 0
    stages: dict[str, Measured] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Every run of each stage, in the order they ran; stages[name] is the median one.
    runs: dict[str, list[Measured]] = field(default_factory=dict)
    naive_slot_rows: int | None = None  # the rows the naive check makes (None: not counted)

    def record(self, m: Measured) -> None:
        """Keep a run of a stage; for a repeated one the median so far stands for it."""
        runs = self.runs.setdefault(m.name, [])
        runs.append(m)
        self.stages[m.name] = median_run(runs)

    def seconds(self, name: str) -> float | None:
        m = self.stages.get(name)
        return round(m.seconds, 3) if m and not m.error else None

    def naive_agrees(self) -> bool | None:
        """Whether the naive per-slot figures equal the analysis' exactly (None: not run)."""
        m = self.stages.get("naive")
        return bool(m.result["agrees"]) if m and not m.error and m.result else None

    def to_json(self) -> dict[str, Any]:
        def per_s(name: str) -> float | None:
            s = self.seconds(name)
            return round(self.events / s) if s else None

        ingest, analyze, floor = (self.seconds(n) for n in ("ingest", "analyze", "scan_floor"))
        read_floor = self.seconds("read_floor")
        write_floor = self.seconds("write_floor")
        peak = max(
            (m.peak_rss_mb for n, m in self.stages.items() if n in ("ingest", "analyze")), default=0
        )
        return {
            **self._cpu_ratios(),
            "events": self.events,
            "requests": self.requests,
            "mix": self.options.mix,
            "ledger_external": not self.options.ledger_load,
            "memory_limit": self.options.memory_limit,
            "ingest_s": ingest,
            "analyze_s": analyze,
            "scan_floor_s": floor,
            "read_floor_s": read_floor,
            "ingest_over_read_floor": round(ingest / read_floor, 2)
            if ingest and read_floor
            else None,
            "write_floor_s": write_floor,
            "ingest_over_write_floor": round(ingest / write_floor, 2)
            if ingest and write_floor
            else None,
            "total_s": round(ingest + analyze, 3) if ingest and analyze else None,
            "ingest_events_per_s": per_s("ingest"),
            "analyze_events_per_s": per_s("analyze"),
            "analyze_over_floor": round(analyze / floor, 2) if analyze and floor else None,
            "analyze_us_per_event": round(analyze * 1e6 / self.events, 3)
            if analyze and self.events
            else None,
            "peak_rss_mb": round(peak, 1),
            "naive_s": self.seconds("naive"),
            "naive_agrees": self.naive_agrees(),
            "naive_slot_rows": self.naive_slot_rows,
            "repeat": len(self.runs.get("analyze", [])),
            "runs_s": {n: [round(m.seconds, 3) for m in ms] for n, ms in self.runs.items()},
            "stages": {n: _stage_json(m) for n, m in self.stages.items()},
            "notes": self.notes,
        }

    def _cpu_ratios(self) -> dict[str, float | None]:
        """The same ratios in CPU seconds, which a busy machine disturbs less than wall time."""

        def ratio(a: str, b: str) -> float | None:
            ma, mb = self.stages.get(a), self.stages.get(b)
            if not ma or not mb or ma.error or mb.error or mb.cpu_seconds <= 0:
                return None
            return round(ma.cpu_seconds / mb.cpu_seconds, 2)

        return {
            "ingest_over_read_floor_cpu": ratio("ingest", "read_floor"),
            "analyze_over_floor_cpu": ratio("analyze", "scan_floor"),
            "ingest_over_write_floor_cpu": ratio("ingest", "write_floor"),
            "write_floor_over_read_floor_cpu": ratio("write_floor", "read_floor"),
        }


def median_run(runs: list[Measured]) -> Measured:
    """The run of median wall time (of an even count, the quicker of the two middle ones): a
    run that happened, so its CPU time and memory are those of the same run. A failed run
    stands for the stage whenever there is one, so that a failure is never hidden."""
    failed = [m for m in runs if m.error]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda m: m.seconds)
    return ordered[(len(ordered) - 1) // 2]


def _stage_json(m: Measured) -> dict[str, Any]:
    return {
        "seconds": round(m.seconds, 3),
        "cpu_seconds": round(m.cpu_seconds, 3),
        "cores_busy": round(m.cores_busy, 2),
        "peak_rss_mb": round(m.peak_rss_mb, 1),
        "result": m.result,
        "error": m.error,
    }


def run_bench(options: BenchOptions, progress: ProgressFn = no_progress) -> BenchResult:
    check_options(options, stages.MIXES)
    root = work_folder(options.workdir)
    try:
        result = prepared(options, root, progress)
        for _ in range(options.repeat):
            timed_round(result, root, progress)
        finished(result, root, progress)
        return result
    finally:
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)


def check_options(options: BenchOptions, mixes: Iterable[str]) -> None:
    """Usage errors before anything runs; mixes: the --mix values this run takes."""
    if options.mix not in mixes:
        raise UsageError(f"--mix must be one of {', '.join(mixes)}")
    if options.events < 1000:
        raise UsageError("--events must be at least 1000")
    if options.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    if options.ledger_external not in (None, CASE_LEDGER):
        raise UsageError(
            "bench keeps its simulated ledger in its own case folder: give --ledger-external "
            "without a location"
        )
    if options.ledger_load and options.ledger_external is not None:
        raise UsageError(
            "--ledger-load and --ledger-external ask for opposite things: give one (by default "
            "the ledger is read in place, as --ledger-external does)"
        )


def work_folder(workdir: Path | None) -> Path:
    """A new folder for this run's ledger and case, inside workdir (made when missing) or the
    system's temporary folder."""
    try:
        if workdir is not None:
            workdir.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="kvf-bench-", dir=workdir))
    except OSError as e:
        where = (
            f"--workdir {workdir}" if workdir else f"the temporary folder {tempfile.gettempdir()}"
        )
        raise UsageError(
            f"{where}: cannot make a folder there ({e.strerror}); give a writable --workdir"
        ) from e


def prepared(options: BenchOptions, root: Path, progress: ProgressFn = no_progress) -> BenchResult:
    """Simulate a ledger of options.mix in root/case and ingest it into root/case.duckdb."""
    result = BenchResult(options)
    case, db = root / "case", root / "case.duckdb"
    progress("pilot runs (sizing the ledger)", 0, None)
    requests = _requests_for(options, root / "pilot")
    progress(f"simulate ({requests:,} requests)", 0, None)
    sim = _checked(
        measure("simulate", stages.simulate_case, str(case), options.mix, requests, options.seed)
    )
    result.record(sim)
    result.events, result.requests = sim.result["events"], sim.result["requests"]
    ledger = None if options.ledger_load else CASE_LEDGER
    if ledger is not None:
        stages.partition_ledger(case / ledger)
    progress(f"ingest ({result.events:,} events)", 0, None)
    limit = options.memory_limit
    result.record(_checked(measure("ingest", stages.ingest, str(case), str(db), limit, ledger)))
    return result


def timed_round(result: BenchResult, root: Path, progress: ProgressFn = no_progress) -> None:
    """One timing of the analysis and of the scan floor (the read floor, which stands beside
    ingest, on the first round only)."""
    case, db = root / "case", root / "case.duckdb"
    limit = result.options.memory_limit
    done = len(result.runs.get("analyze", []))
    progress("analyze", done, result.options.repeat)
    result.record(_checked(measure("analyze", stages.analyze, str(db), limit)))
    progress("scan floor", done, result.options.repeat)
    result.record(_checked(measure("scan_floor", stages.scan_floor, str(case))))
    if "read_floor" not in result.stages:
        result.record(_checked(measure("read_floor", stages.read_floor, str(case))))


def finished(result: BenchResult, root: Path, progress: ProgressFn = no_progress) -> None:
    """The stages after the timed rounds: the write floor when asked for, the naive check."""
    options = result.options
    case, db = root / "case", root / "case.duckdb"
    if options.write_floor:
        progress("write floor", 0, None)
        floor_db = str(root / "write_floor.duckdb")
        result.record(
            _checked(
                measure(
                    "write_floor", stages.write_floor, str(case), floor_db, options.memory_limit
                )
            )
        )
    if options.naive:
        progress("naive per-slot check", 0, None)
        _naive(result, options, db)


def _requests_for(options: BenchOptions, pilot_dir: Path) -> int:
    """Requests that make about options.events events. Events per request grow with the
    requests, as the pools fragment (long prompts, which keep the decode pools full, more so:
    1,012 per request at 2,000 long requests, 2,727 at 8,000), so one pilot's rate overshoots.
    A second pilot, of a third of the first estimate (at most MAX_PILOT_REQUESTS), gives a
    second point; the requests come from the power law through both (requests_on_power_law).
    Where that falls below the second pilot (the curve bends up between them, so the line
    through both overshoots there), a third pilot at that estimate and the second give it
    again, from nearby."""
    first = (PILOT_REQUESTS, _pilot_events(options, pilot_dir, PILOT_REQUESTS))
    estimate = _requests_at_rate(options.events, *first)
    second = min(estimate // 3, MAX_PILOT_REQUESTS)
    if second <= PILOT_REQUESTS:
        return estimate
    pilots = [first, (second, _pilot_events(options, pilot_dir, second))]
    estimate = requests_on_power_law(options.events, *pilots)
    if PILOT_REQUESTS < estimate < second:
        pilots = [(estimate, _pilot_events(options, pilot_dir, estimate)), pilots[1]]
        estimate = requests_on_power_law(options.events, *pilots)
    return estimate


def _pilot_events(options: BenchOptions, pilot_dir: Path, requests: int) -> int:
    pilot = stages.simulate_case(str(pilot_dir), options.mix, requests, options.seed)
    shutil.rmtree(pilot_dir, ignore_errors=True)
    return int(pilot["events"])


def _requests_at_rate(events: int, requests: int, made: int) -> int:
    """The requests for `events` at the rate of a pilot of `requests` that made `made`."""
    return max(10, round(events * requests / max(made, requests)))


def requests_on_power_law(events: int, near: tuple[int, int], far: tuple[int, int]) -> int:
    """The requests that make `events` on the power law through two pilots, each (requests,
    events made), the second the larger: events = a * requests^k, k kept between 1 (no growth
    per request, as one pilot's rate) and 3."""
    (r1, e1), (r2, e2) = near, far
    if min(r1, e1, r2, e2) <= 0 or r2 <= r1:
        return _requests_at_rate(events, r2, e2)
    k = min(max(math.log(e2 / e1) / math.log(r2 / r1), 1.0), 3.0)
    return max(10, round(r2 * (events / e2) ** (1 / k)))


def naive_max_slot_rows(timeout_s: float) -> int:
    """The most slot rows the naive check is run on: those it should make within timeout_s."""
    return int(timeout_s * NAIVE_SLOT_ROWS_PER_S)


def _naive(result: BenchResult, options: BenchOptions, db: Path) -> None:
    volume = stages.slot_volume(str(db))
    result.naive_slot_rows = volume
    limit = naive_max_slot_rows(options.naive_timeout_s)
    if volume > limit:
        result.notes.append(
            f"naive per-slot approach not run: it would make {volume:,} slot rows (limit "
            f"{limit:,}, what it makes in {options.naive_timeout_s:.0f} s on 2 cores)"
        )
        return
    naive = measure("naive", stages.naive_per_slot, str(db), timeout=options.naive_timeout_s)
    result.record(naive)
    if naive.error:
        result.notes.append(f"naive per-slot approach: {naive.error} ({volume:,} slot rows)")
    elif not naive.result["agrees"]:
        result.notes.append(f"the naive per-slot figures DIFFER from the analysis: {naive.result}")


def _checked(m: Measured) -> Measured:
    if m.error:
        raise UsageError(f"bench stage {m.name} failed: {m.error}")
    return m
