"""Measure how fast `kvforensics simulate` generates KV events.

Runs the full-size incident scenario without ground truth and contents (what a scale benchmark
uses), writing the Parquet ledger to a temporary folder, and prints events per second for the
engine alone (events handed to a counting sink) and end to end (engine plus Parquet parts).
On a shared machine the per-CPU-second figure is the steadier one.

    PYTHONPATH=. python benchmarks/bench_simulate.py [--requests 20000] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from forensics.simulate.engine import Engine
from forensics.simulate.run import SimOptions, scenario, simulate
from forensics.simulate.traffic import make_traffic


def engine_only(opts: SimOptions) -> tuple[int, float, float]:
    sc = scenario(opts)
    traffic = make_traffic(opts.requests, opts.seed, sc)
    count = [0]

    def sink(chunk) -> None:  # type: ignore[no-untyped-def]
        count[0] += len(chunk)

    start, cpu = time.perf_counter(), time.process_time()
    Engine(sc, traffic, opts.seed, sink).run()
    return count[0], time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    opts = SimOptions(requests=args.requests, seed=args.seed, truth=False, contents=False)
    engine_only(SimOptions(requests=50, seed=0, truth=False))  # compile the kernels once
    events, seconds, cpu = engine_only(opts)
    print(
        f"engine only : {events:,} events in {seconds:.2f} s = {events / seconds:,.0f} events/s "
        f"({events / cpu:,.0f} per CPU second; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        summary = simulate(Path(tmp) / "case", opts)
        total = time.perf_counter() - start
        size = sum(p.stat().st_size for p in (Path(tmp) / "case").rglob("*") if p.is_file())
    print(
        f"end to end  : {summary['events']:,} events in {total:.2f} s = "
        f"{summary['events'] / total:,.0f} events/s ({size / 1e6:.0f} MB written, "
        f"{args.requests:,} requests)"
    )


if __name__ == "__main__":
    main()
