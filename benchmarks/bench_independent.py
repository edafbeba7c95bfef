"""Ledger-free precision and recall on cases made apart from the project's own model of the
engine: tests/support/sglang_cases.py drives SGLang's real paged allocator under a scheduler of
its own (decode pages allocated step by step, waiting preallocations, jittered gateway times).

For each seed: make the case in the engines' environment, ingest it (no ledger: the generator
writes none), then score the lists per side and unit against the generator's truth, for
screening alone and for screening plus reconstruction (`reconstruct`, then `analyze`):

    PYTHONPATH=. python benchmarks/bench_independent.py [--requests 1500] [--accounts 1000]
        [--seeds 1 2 3] [--bursts 0.3] [--jitter-us 1000] [--skew-ms 25] [--orders 8]
        [--page-size 16] [--allocator paged|token] [--need-sort 1|0]
        [--reserved-decode-tokens R [--logged-headroom]]
        [--engine-version V] [--sglang-free-list version|any|staged|front|back]

--page-size is the tokens per page SGLang was started with (1 is its default: every decode
token is an allocation of its own, and the rebuild follows each one). --allocator and
--need-sort build the generator's allocator as SGLang builds it elsewhere (the generator's
docstring), and nodes.csv names a release that builds it so (--engine-version names another:
a nodes table that misnames the engine). --sglang-free-list is what reconstruction is told of
it (version, the default: the lists take the way the named release builds, the pairs only the
other ways have kept apart, and each seed's line says how many of the true leaking accounts
the lists miss are among those kept apart; any: every way listed). Each seed's log
is also made on the other allocators of its page size, to print the best leaking-account
precision a list can have that keeps every true account whichever of them ran.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import duckdb

from benchmarks.bench_reconstruct import SIDES, _ingested, found, print_case, score
from forensics.analysis.stage import analyze
from forensics.casedb.sql import sql
from forensics.engines.client import engines_python
from forensics.options import FreeList, ReconstructOptions
from forensics.reconstruct.stage import reconstruct

CEILING = [0, 0]  # true leaking accounts, and over every way, summed over the seeds
GENERATOR = Path(__file__).resolve().parents[1] / "tests" / "support" / "sglang_cases.py"


def make_case(out: Path, seed: int, args: argparse.Namespace) -> None:
    cmd = [str(engines_python()), str(GENERATOR), str(out), "--seed", str(seed)]
    for k in (
        "requests",
        "accounts",
        "bursts",
        "jitter_us",
        "page_size",
        "allocator",
        "need_sort",
        "reserved_decode_tokens",
    ):
        cmd += [f"--{k.replace('_', '-')}", str(getattr(args, k))]
    if args.engine_version:
        cmd += ["--engine-version", args.engine_version]
    subprocess.run(cmd, check=True)


def truth(case: Path) -> dict[tuple[str, str], set[str]]:
    """(side, unit) -> the cross-account request or account ids the generator recorded."""
    stubs = json.loads((case / "truth.json").read_text())["stubs"]
    out: dict[tuple[str, str], set[str]] = {k: set() for k in _keys()}
    for rid, s in stubs.items():
        cross = [(r, a) for r, a in s["leakers"] if a != s["account"]]
        if cross:
            out[("receiving", "requests")].add(rid)
            out[("receiving", "accounts")].add(s["account"])
        out[("leaking", "requests")] |= {r for r, _ in cross}
        out[("leaking", "accounts")] |= {a for _, a in cross}
    return out


def _keys() -> list[tuple[str, str]]:
    return [(s, u) for s in SIDES for u in ("requests", "accounts")]


def model_pairs(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], set[str]]:
    """The reconstruction's own cross-account pairs, before the lists' rules add to them."""
    rows = con.execute(sql("bench/reconstructed_pairs")).fetchall()
    return {
        ("receiving", "requests"): {r[0] for r in rows},
        ("receiving", "accounts"): {r[1] for r in rows},
        ("leaking", "requests"): {r[2] for r in rows},
        ("leaking", "accounts"): {r[3] for r in rows},
    }


def log_headroom(case: Path, tokens: int, page_size: int) -> None:
    """Give each decode node the start-up lines SGLang writes, its server_args naming the
    headroom the generator kept (--num-reserved-decode-tokens), as a responder with the
    engines' logs has them."""
    (case / "logs").mkdir()
    for k in range(2):
        (case / "logs" / f"decode-{k}.log").write_text(
            "[2026-08-31 23:00:00] server_args=ServerArgs(model_path='/m/tiny', page_size="
            f"{page_size}, context_length=1049, disaggregation_mode='decode', "
            f"num_reserved_decode_tokens={tokens})\n"
            "[2026-08-31 23:00:01] max_total_num_tokens=1440, chunked_prefill_size=8192, "
            "max_prefill_tokens=16384, max_running_requests=64, context_len=1049\n"
        )


def ways(args: argparse.Namespace) -> list[tuple[str, int]]:
    """The allocators SGLang builds for this page size: (--allocator, --need-sort)."""
    return [("paged", 1), ("paged", 0)] + ([("token", 0)] if args.page_size == 1 else [])


def ceiling(work: Path, seed: int, args: argparse.Namespace, want: set[str]) -> tuple[int, int]:
    """The same log made on every allocator SGLang builds for the page size (the request log
    is the same whichever ran): (true leaking accounts of this case, the union over every
    way). No list that keeps every true account whichever way ran can be more precise than
    the first over the second where the way is not known."""
    union = set(want)
    for allocator, need_sort in ways(args):
        if (allocator, need_sort) == (args.allocator, args.need_sort):
            continue
        other = work / f"case-{seed}-{allocator}-{need_sort}"
        make_case(
            other,
            seed,
            argparse.Namespace(**{**vars(args), "allocator": allocator, "need_sort": need_sort}),
        )
        union |= truth(other)[("leaking", "accounts")]
        shutil.rmtree(other)
    return len(want), len(union)


def run_case(work: Path, seed: int, args: argparse.Namespace) -> dict[str, dict]:
    case = work / f"case-{seed}"
    make_case(case, seed, args)
    want = truth(case)
    if args.logged_headroom:
        log_headroom(case, args.reserved_decode_tokens, args.page_size)
    true, union = ceiling(work, seed, args, want[("leaking", "accounts")])
    print(
        f"seed {seed}: {true} true leaking accounts, {union} over every way SGLang may free "
        f"pages: leaking-account precision at most {true / union:.3f} where the way is not "
        "known and every true account is kept"
    )
    CEILING[0] += true
    CEILING[1] += union
    (case / "truth.json").rename(work / f"truth-{seed}.json")
    con = _ingested(case, work / f"case-{seed}.duckdb")
    analyze(con)
    results = {"screening": {k: score(v, want[k]) for k, v in found(con).items()}}
    started = time.perf_counter()
    options = ReconstructOptions(
        skew_ms=args.skew_ms,
        orders=args.orders,
        replay_budget=0,
        free_list=args.sglang_free_list,
    )
    reconstruct(con, options)
    seconds = time.perf_counter() - started
    sampled, stubs = con.execute(sql("bench/sampled_stubs")).fetchall()[0]
    analyze(con)
    results["reconstructed"] = {k: score(v, want[k]) for k, v in found(con).items()}
    results["model pairs"] = {k: score(v, want[k]) for k, v in model_pairs(con).items()}
    listed = found(con)[("leaking", "accounts")]
    apart = {a for (a,) in con.execute(sql("bench/other_ways_accounts")).fetchall()} - listed
    con.close()
    missed = want[("leaking", "accounts")] - listed
    print_case(
        f"seed {seed}: reconstruct {seconds:.1f} s, {sampled} of {stubs} stub reads sampled; "
        f"kept apart (only the ways the named release does not build): {len(apart)} leaking "
        f"accounts, {len(apart & missed)} of the {len(missed)} true ones the lists miss",
        results,
    )
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--accounts", type=int, default=1000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--bursts", type=float, default=0.3)
    ap.add_argument("--jitter-us", type=int, default=1000)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--allocator", choices=["paged", "token"], default="paged")
    ap.add_argument("--need-sort", type=int, choices=[0, 1], default=1)
    ap.add_argument("--reserved-decode-tokens", type=int, default=0)
    ap.add_argument(
        "--engine-version",
        default=None,
        help="the SGLang release nodes.csv names (default: one that builds the allocator made)",
    )
    ap.add_argument(
        "--logged-headroom",
        action="store_true",
        help="give the decode nodes SGLang's server_args line naming the headroom kept",
    )
    ap.add_argument(
        "--sglang-free-list",
        choices=[f.value for f in FreeList],
        default=ReconstructOptions().free_list.value,
        help="the way reconstruction takes the allocator to put freed pages back",
    )
    ap.add_argument("--skew-ms", type=float, default=ReconstructOptions().skew_ms)
    ap.add_argument("--orders", type=int, default=ReconstructOptions().orders)
    args = ap.parse_args()
    total: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for method, res in run_case(Path(tmp), seed, args).items():
                for (side, unit), t in res.items():
                    for j, v in enumerate(t):
                        total[(method, side, unit)][j] += v
    print(
        f"\n{args.requests} requests, {args.accounts} accounts, seeds {args.seeds}, "
        f"{args.page_size}-token pages, the generator's allocator {args.allocator} "
        f"(need_sort {args.need_sort}), reconstruction told --sglang-free-list "
        f"{args.sglang_free_list}\n"
    )
    print(
        f"Leaking-account precision possible where the free list is not known (every true "
        f"account kept whichever way ran): at most {CEILING[0]} / {CEILING[1]} = "
        f"{CEILING[0] / max(CEILING[1], 1):.3f}\n"
    )
    print("| method | side | unit | found | true | precision | recall |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (method, side, unit), (hit, got, want) in total.items():
        p = hit / got if got else 1.0
        r = hit / want if want else 1.0
        print(f"| {method} | {side} | {unit} | {got} | {want} | {p:.3f} | {r:.3f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
