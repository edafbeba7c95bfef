"""Analysis speed on a synthetic ledger: events per second of the compiled sweep.

Usage: PYTHONPATH=. python benchmarks/bench_sweep.py [--events 3000000] [--nodes 2]
       [--workers 2] [--decode 32] [--pool SLOTS]

Each node serves requests one after another from a page allocator over its pool: alloc the
prompt's pages, prefill-write and read them, then `decode` steps of (alloc a page when the last
one is full, write 1 slot, read the whole sequence), then free. One request in 50 is an
incident: it allocates its full prompt but only its first slot is written (a 1-token stub), so
its reads see the pages' previous owners. Prompt lengths are drawn from 16 to 200,000 tokens:
the sweep's cost must not depend on them. Prints events/s for the sweep alone and for the
whole analysis through DuckDB (ordering, sweep, SQL aggregation) on a smaller ledger.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from forensics.analysis.sweep import ALLOC, FREE, READ, WRITE, sweep_node
from forensics.casedb.sql import sql


@dataclass(frozen=True)
class NodeEvents:
    """One synthetic node's events in order, as the sweep takes them."""

    node: str
    req: np.ndarray
    op: np.ndarray
    slot_start: np.ndarray
    slot_count: np.ndarray
    content_hash: np.ndarray


def sweep_nodes(nodes: list[NodeEvents], workers: int = 2) -> list[tuple[np.ndarray, ...]]:
    """Sweep every node, `workers` at a time (the compiled sweep releases the GIL)."""

    def one(ev: NodeEvents) -> tuple[np.ndarray, ...]:
        return sweep_node(ev.req, ev.op, ev.slot_start, ev.slot_count, ev.content_hash)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, nodes))


def _request(r: int, base: int, prompt: int, decode: int, stub: bool) -> list[tuple]:
    """One request's events as (req, op, start, count), in its own order."""
    ev = [
        (r, ALLOC, base, prompt),
        (r, WRITE, base, 1 if stub else prompt),
        (r, READ, base, prompt),
    ]
    for k in range(decode):
        ev += [
            (r, ALLOC, base + prompt + k, 1),
            (r, WRITE, base + prompt + k, 1),
            (r, READ, base, prompt + k + 1),
        ]
    ev.append((r, FREE, base, prompt + decode))
    return ev


def node_ledger(n_events: int, seed: int, decode: int, pool: int, live: int = 8) -> NodeEvents:
    """Requests take contiguous slots from a ring over the pool, `live` at a time, their events
    interleaved round-robin (so up to `live` requests hold slots at once)."""
    rng = np.random.default_rng(seed)
    rows: list[tuple] = []
    cursor, r, active = 0, 0, []
    while len(rows) < n_events:
        while len(active) < live:
            prompt = int(min(200_000, rng.lognormal(7, 2) + 16))
            if cursor + prompt + decode > pool:
                cursor = 0
            active.append(iter(_request(r, cursor, prompt, decode, r % 50 == 7)))
            cursor += prompt + decode
            r += 1
        for it in list(active):
            step = next(it, None)
            if step is None:
                active.remove(it)
            else:
                rows.append(step)
    a = np.array(rows, dtype=np.int64)
    return NodeEvents(
        f"node-{seed}", a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.full(len(a), -1, np.int64)
    )


def whole_analysis(nodes: list[NodeEvents]) -> None:
    """Time `analyze` (DuckDB ordering, sweep, SQL) on the ledger loaded into a case database."""
    import pyarrow as pa

    from forensics.analysis.codes import OPS
    from forensics.analysis.stage import analyze
    from forensics.db import connect

    con = connect(":memory:")
    for k, ev in enumerate(nodes):
        n = len(ev.req)
        names = np.array([f"{ev.node}-r{r}" for r in range(int(ev.req.max()) + 1)])
        ts = np.datetime64("2026-08-27T00:00:00", "us") + np.arange(n).astype("timedelta64[us]")
        table = pa.table(
            {
                "ts": ts,
                "node": np.full(n, ev.node),
                "request_id": names[ev.req],
                "op": np.array(OPS)[ev.op],
                "slot_start": ev.slot_start,
                "slot_count": ev.slot_count,
                "pos_start": np.zeros(n, np.int64),
                "input_order": np.arange(n) + k * n,
                "request_known": np.ones(n, bool),
                "src_file": np.full(n, "kv_events.parquet"),
                "src_row": np.arange(n) + 1,
            }
        )
        con.register("_bench", table)
        con.execute(sql("bench/insert_kv_events"))
        con.unregister("_bench")
    started, cpu = time.perf_counter(), time.process_time()
    summary = analyze(con)
    took, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"whole analysis: {summary['events']:,} events in {took:.2f} s wall "
        f"({summary['events'] / took:,.0f} events/s), {cpu:.2f} s CPU; "
        f"{summary['exposure_runs']:,} exposure runs"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=3_000_000)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--pool", type=int, default=681_280 * 4)
    ap.add_argument(
        "--db-events",
        type=int,
        default=1_000_000,
        help="events for the whole-analysis timing (0: skip it)",
    )
    args = ap.parse_args()
    per_node = args.events // args.nodes
    started = time.perf_counter()
    nodes = [node_ledger(per_node, seed, args.decode, args.pool) for seed in range(args.nodes)]
    total = sum(len(n.req) for n in nodes)
    slots = sum(int(n.slot_count.sum()) for n in nodes)
    print(
        f"ledger: {total:,} events on {args.nodes} nodes, {slots:,} slots in all ranges "
        f"(built in {time.perf_counter() - started:.1f} s)"
    )
    sweep_nodes([node_ledger(1000, 99, 4, 10_000)])  # compile or load the cached code
    for workers in sorted({1, args.workers}):
        started, cpu = time.perf_counter(), time.process_time()
        pieces = sweep_nodes(nodes, workers)
        took, cpu = time.perf_counter() - started, time.process_time() - cpu
        foreign = sum(len(p[0]) for p in pieces)
        print(
            f"sweep, {workers} worker(s): {took:.2f} s wall, {total / took:,.0f} events/s; "
            f"{cpu:.2f} s CPU, {total / cpu:,.0f} events per CPU-second; "
            f"{foreign:,} foreign pieces"
        )
    if args.db_events:
        per_node = args.db_events // args.nodes
        whole_analysis(
            [node_ledger(per_node, s, args.decode, args.pool) for s in range(args.nodes)]
        )


if __name__ == "__main__":
    main()
