"""Measure how well the affected parties are found when the KV ledger is withheld.

For each allocator kind (the simulator's LIFO pool, SGLang's real PagedTokenToKVPoolAllocator,
vLLM's real BlockPool) and seed, simulate an oversize-stub incident with many more accounts
than leakers, delete kv_events/ from the case folder, and score against the simulator's ground
truth (cross-account requests and accounts, both sides):

- window:        today's screening alone (every suspect receiver; every request in the window
                 before a suspect on its decode node as a leaker);
- reconstructed: `reconstruct` (the node's allocator, chosen as the simulation's) then `analyze`;
- ledger:        the same case with its ledger, for reference (should be exact);
- replayed:      with --replay, `reconstruct` with replay deciding between the explored layouts
                 (outputs made by the test model, contents kept).

--skew-ms widens the window in which the timestamps are not trusted to order operations, to see
how explored orders add candidates and replay clears them.

Prints one row per (allocator, method, side, unit) with precision and recall summed over the
seeds (micro-averaged), the worst seed's figures, and a Markdown table. The sglang and vllm
kinds need the engines' environment (scripts/engines_venv.sh, KVFORENSICS_ENGINES_VENV).

    PYTHONPATH=. python benchmarks/bench_reconstruct.py [--requests 1500] [--accounts 1000]
        [--seeds 1 2 3] [--allocators lifo sglang vllm] [--days 1]
        [--skew-ms 25] [--replay]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import duckdb
import polars as pl

from forensics.analysis.stage import analyze
from forensics.casedb.sql import sql
from forensics.db import connect
from forensics.ingest.load import ingest_case
from forensics.options import Allocator, ReconstructOptions
from forensics.reconstruct.stage import reconstruct
from forensics.simulate.run import SimOptions, simulate

SIDES = ("receiving", "leaking")


def truth(folder: Path) -> dict[tuple[str, str], set[str]]:
    """(side, unit) -> the cross-account request or account ids of the ground truth."""
    out: dict[tuple[str, str], set[str]] = {}
    for side in SIDES:
        req = pl.read_csv(folder / f"{side}_requests.csv", infer_schema_length=0)
        req = req.filter(pl.col("cross_account_tokens").cast(pl.Int64) > 0)
        out[(side, "requests")] = set(req["request_id"])
        out[(side, "accounts")] = set(req["account_id"])
    return out


def found(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    rows = con.execute(sql("bench/found_pairs")).fetchall()
    for side in SIDES:
        out[(side, "requests")] = {r for s, r, _ in rows if s == side}
        out[(side, "accounts")] = {a for s, _, a in rows if s == side}
    return out


def window(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], set[str]]:
    """Screening alone: every suspect receiver, every request in the window before one."""
    out = found(con)
    rows = con.execute(sql("bench/window_suspects")).fetchall()
    out[("receiving", "requests")] |= {r for r, _ in rows}
    out[("receiving", "accounts")] |= {a for _, a in rows}
    return out


def score(got: set[str], want: set[str]) -> tuple[int, int, int]:
    return len(got & want), len(got), len(want)


def _ingested(case: Path, db: Path) -> duckdb.DuckDBPyConnection:
    ingest_case(case, db)
    return connect(db)


def run_case(
    work: Path, allocator: str, seed: int, args: argparse.Namespace
) -> dict[str, dict[tuple[str, str], tuple[int, int, int]]]:
    case = work / f"{allocator}-{seed}"
    opts = SimOptions(
        requests=args.requests,
        seed=seed,
        scale=args.scale,
        days=args.days,
        allocator=allocator,
        contents=args.replay,
        model="test" if args.replay else "synthetic",
        overrides=(("accounts", args.accounts),),
    )
    simulate(case, opts)
    want = truth(case / "ground_truth")
    results = {}
    con = _ingested(case, work / f"{allocator}-{seed}-ledger.duckdb")
    analyze(con)
    results["ledger"] = {k: score(v, want[k]) for k, v in found(con).items()}
    con.close()
    shutil.rmtree(case / "kv_events")
    shutil.rmtree(case / "ground_truth")
    con = _ingested(case, work / f"{allocator}-{seed}.duckdb")
    analyze(con)
    results["window"] = {k: score(v, want[k]) for k, v in window(con).items()}
    started = time.perf_counter()
    rc = ReconstructOptions(allocator=Allocator(allocator), skew_ms=args.skew_ms, replay_budget=0)
    reconstruct(con, rc)
    seconds = time.perf_counter() - started
    analyze(con)
    results["reconstructed"] = {k: score(v, want[k]) for k, v in found(con).items()}
    if args.replay:
        reconstruct(con, replace(rc, replay_budget=4, replay_model="test"))
        analyze(con)
        results["replayed"] = {k: score(v, want[k]) for k, v in found(con).items()}
    orders = con.execute(sql("bench/max_orders")).fetchone()
    con.close()
    print_case(
        f"{allocator} seed {seed}: reconstruct {seconds:.1f} s, max orders {orders[0]}", results
    )
    return results


def print_case(label: str, results: dict[str, dict[tuple[str, str], tuple[int, int, int]]]) -> None:
    """One line per case: hits / listed of true, per method, side and unit."""
    print(
        f"# {label}; "
        + "; ".join(
            f"{m} {s}-{u} {t[0]}/{t[1]} of {t[2]}"
            for m, r in results.items()
            for (s, u), t in r.items()
        ),
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--accounts", type=int, default=1000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--allocators", nargs="+", default=["lifo", "sglang", "vllm"])
    ap.add_argument("--scale", type=float, default=0.001)
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--skew-ms", type=float, default=ReconstructOptions().skew_ms)
    ap.add_argument("--replay", action="store_true", help="also measure replay deciding")
    args = ap.parse_args()
    total: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    worst: dict[tuple[str, str, str, str], list[float]] = defaultdict(lambda: [1.0, 1.0])
    with tempfile.TemporaryDirectory() as tmp:
        for allocator in args.allocators:
            for seed in args.seeds:
                for method, res in run_case(Path(tmp), allocator, seed, args).items():
                    for (side, unit), (hit, got, want) in res.items():
                        key = (allocator, method, side, unit)
                        for j, v in enumerate((hit, got, want)):
                            total[key][j] += v
                        worst[key][0] = min(worst[key][0], hit / got if got else 1.0)
                        worst[key][1] = min(worst[key][1], hit / want if want else 1.0)
    print(
        f"\n{args.requests} requests, {args.accounts} accounts, seeds {args.seeds}, "
        f"scale {args.scale}, {args.days} days, skew {args.skew_ms} ms; precision / recall "
        "summed over the seeds (worst seed in brackets)\n"
    )
    print("| allocator | method | side | unit | found | true | precision | recall |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for (allocator, method, side, unit), (hit, got, want) in total.items():
        p = hit / got if got else 1.0
        r = hit / want if want else 1.0
        wp, wr = worst[(allocator, method, side, unit)]
        print(
            f"| {allocator} | {method} | {side} | {unit} | {got} | {want} | "
            f"{p:.3f} ({wp:.3f}) | {r:.3f} ({wr:.3f}) |"
        )


if __name__ == "__main__":
    main()
