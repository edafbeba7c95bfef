"""The inputs of docs/scale.md, measured on this machine: the per-node task cost of the analysis
(fetch, order, sweep, emit) per event, Ray's own cost per task (a task that does nothing, and
one that carries a node's events through the object store), and the whole analysis on the local
engine and on an embedded Ray.

    .venv/bin/python benchmarks/bench_ray.py --requests 20000 --nodes 8

Prints one JSON object."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any


def _noop(x: int) -> int:
    return x


def task_overhead(ray: Any, tasks: int) -> dict[str, float]:
    """Round trip of a task that does nothing: one at a time, and many in flight."""
    remote = ray.remote(num_cpus=1)(_noop)
    ray.get(remote.remote(0))  # warm a worker
    started = time.perf_counter()
    for i in range(tasks):
        ray.get(remote.remote(i))
    serial = (time.perf_counter() - started) / tasks
    started = time.perf_counter()
    ray.get([remote.remote(i) for i in range(tasks)])
    batched = (time.perf_counter() - started) / tasks
    return {
        "noop_task_serial_ms": round(serial * 1e3, 3),
        "noop_task_in_flight_ms": round(batched * 1e3, 3),
    }


def per_node(db: Path, ray: Any) -> list[dict[str, Any]]:
    """Per node: events, the task's work done here (order, sweep, emit) and on Ray (the same
    work plus the object store and scheduling)."""
    import pyarrow as pa

    from forensics.analysis import order
    from forensics.analysis.distributed import sweep_node_table
    from forensics.db import connect

    con = connect(db)
    out = []
    try:
        order.prepare_pieces(con)
        remote = ray.remote(num_cpus=1)(sweep_node_table)
        for info in order.node_list(con):
            started = time.perf_counter()
            table = pa.Table.from_batches(list(order.fetch_batches(con, info)))
            fetched = time.perf_counter()
            tracemalloc.start()
            sweep_node_table(info, table)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            local = time.perf_counter()
            ray.get(remote.remote(info, ray.put(table)))
            on_ray = time.perf_counter()
            out.append(
                {
                    "node": info.node,
                    "events": info.events,
                    "fetch_s": round(fetched - started, 4),
                    "task_local_s": round(local - fetched, 4),
                    "task_on_ray_s": round(on_ray - local, 4),
                    "arrow_bytes": table.nbytes,
                    "task_peak_bytes": peak,
                }
            )
    finally:
        con.close()
    return out


def analysis_seconds(db: Path, ray: str | None) -> float:
    from forensics.analysis.stage import analyze
    from forensics.db import connect
    from forensics.options import AnalysisOptions

    con = connect(db)
    try:
        started = time.perf_counter()
        analyze(con, AnalysisOptions(workers=2, ray=ray))
        return round(time.perf_counter() - started, 3)
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--nodes", type=int, default=8, help="engine nodes (half prefill)")
    parser.add_argument("--tasks", type=int, default=200, help="no-op tasks to time")
    args = parser.parse_args()

    from forensics.bench.stages import MIXES, REQUESTS_PER_DAY
    from forensics.ingest.load import ingest_case
    from forensics.simulate.run import SimOptions, simulate

    root = Path(tempfile.mkdtemp(prefix="kvf-bench-ray-"))
    try:
        half = max(1, args.nodes // 2)
        nodes = (("prefill_nodes", half), ("decode_nodes", max(1, args.nodes - half)))
        sim = simulate(
            root / "case",
            SimOptions(
                requests=args.requests,
                seed=7,
                truth=False,
                contents=False,
                days=args.requests / REQUESTS_PER_DAY,
                overrides=(*MIXES["short"], *nodes),
            ),
        )
        db = root / "case.duckdb"
        ingest_case(root / "case", db)
        local_s = analysis_seconds(db, None)
        import ray

        started = time.perf_counter()
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=512 * 1024 * 1024,
            configure_logging=False,
        )
        ray_start_s = round(time.perf_counter() - started, 3)
        try:
            overhead = task_overhead(ray, args.tasks)
            nodes_out = per_node(db, ray)
            on_ray_s = analysis_seconds(db, "local")  # reuses the Ray started here
        finally:
            ray.shutdown()
        events = sim["events"]
        task_local = sum(n["task_local_s"] for n in nodes_out)
        busiest = max(nodes_out, key=lambda n: n["events"])
        parquet = sum(p.stat().st_size for p in (root / "case" / "kv_events").rglob("*.parquet"))
        print(
            json.dumps(
                {
                    "events": events,
                    "requests": sim["requests"],
                    "nodes": len(nodes_out),
                    "load_average": os.getloadavg(),
                    "analysis_local_s": local_s,
                    "analysis_on_embedded_ray_s": on_ray_s,
                    "ray_start_s": ray_start_s,
                    "task_us_per_event": round(task_local * 1e6 / events, 3),
                    "parquet_bytes_per_event": round(parquet / events, 2),
                    "busiest_node_events": busiest["events"],
                    "task_peak_bytes_per_event": round(
                        busiest["task_peak_bytes"] / busiest["events"], 1
                    ),
                    **overhead,
                    "per_node": nodes_out,
                },
                indent=1,
            )
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
