"""How the rebuild of a vLLM node fares when one output is logged late within its step.

A request log written beside the engine logs one step's outputs microseconds apart, but a
process held up while it logs them (a loaded machine) puts the rest of the step milliseconds
later, and a delayed output can read as a step of its own. Real runs of
`bench_ledger_free_vllm.py` (its --workdir, the `batched` mode) are taken again with one output
delayed at a time: each first token or completion logged within 50 µs of another output (so
one of a step's outputs) in the window before the stub's first token, moved later by
--delay-us. Each such log is ingested, rebuilt and analysed, and scored against the run's
tapped ledger (truth.duckdb): the true parties it no longer lists, and whether the node kept
any run.

    PYTHONPATH=. python benchmarks/bench_late_outputs.py --workdir DIR [--seeds 7 8]
        [--delay-us 1400] [--per-seed 4] [--window-ms 60]

Prints one row per delayed output and a summary: the delays that left a true party off the
lists (a false clear), and those after which the node kept no run (it clears nobody).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import io
import shutil
import sys
import tempfile
from pathlib import Path

import duckdb

from forensics.casedb.sql import sql
from forensics.cli import run as cli

COLUMNS = ("first_token_at", "completed_at")
TOGETHER_US = 50  # outputs this close are one step's


def _us(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1_000_000)


def _iso(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1_000_000, dt.UTC).isoformat(timespec="microseconds")


def _affected(db: Path) -> set[tuple[str, str, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(sql("bench/found_pairs")).fetchall()
    finally:
        con.close()
    return {(s, r, a) for s, r, a in rows}


def delayable(rows: list[dict[str, str]], window_us: int, most: int) -> list[tuple[str, str]]:
    """(request id, column) of the outputs logged with another one, in the window before the
    stub's first token, the latest `most` of them."""
    stub = next(r for r in rows if r["request_id"].startswith("stub"))
    until = _us(stub["first_token_at"])
    times = sorted({_us(r[c]) for r in rows for c in COLUMNS if r[c]})
    out = []
    for r in rows:
        for c in COLUMNS:
            t = _us(r[c]) if r[c] else None
            if t is None or not until - window_us <= t <= until:
                continue
            if any(0 < abs(t - u) <= TOGETHER_US for u in times):
                out.append((t, r["request_id"], c))
    return [(rid, c) for _, rid, c in sorted(out)[-most:]]


def delayed_case(run: Path, work: Path, rid: str, column: str, delay_us: int) -> Path:
    """The run's withheld case with one output logged delay_us later."""
    case = work / "case"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(run / "withheld", case, ignore=shutil.ignore_patterns("run.json"))
    with open(case / "requests.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        if r["request_id"] == rid:
            r[column] = _iso(_us(r[column]) + delay_us)
            if _us(r["completed_at"]) < _us(r["first_token_at"]):
                r["completed_at"] = r["first_token_at"]
    with open(case / "requests.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return case


def rebuilt(case: Path, db: Path) -> tuple[set[tuple[str, str, str]], bool]:
    """The lists and whether the node kept a run, after ingest, reconstruct and analyze."""
    for args in (["ingest", str(case)], ["reconstruct"], ["analyze"]):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            cli([*args, "--db", str(db)])
    con = duckdb.connect(str(db), read_only=True)
    try:
        kept = bool(con.execute(sql("bench/nodes_consistent")).fetchall()[0][0])
    finally:
        con.close()
    return _affected(db), kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 8, 12, 13, 14, 15])
    ap.add_argument("--delay-us", type=int, default=1400)
    ap.add_argument("--per-seed", type=int, default=4)
    ap.add_argument("--window-ms", type=float, default=60)
    args = ap.parse_args()
    print(
        "| seed | output delayed | node kept a run | true parties not listed | "
        "leaking accounts listed / true |"
    )
    print("|---|---|---|---|---|")
    cleared = kept_runs = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            run = args.workdir / f"batched-{seed}"
            truth = _affected(run / "truth.duckdb")
            with open(run / "withheld" / "requests.csv", newline="") as fh:
                rows = list(csv.DictReader(fh))
            for rid, column in delayable(rows, int(args.window_ms * 1000), args.per_seed):
                work = Path(tmp) / f"{seed}-{rid}-{column}"
                case = delayed_case(run, work, rid, column, args.delay_us)
                listed, kept = rebuilt(case, work / "case.duckdb")
                missed = sorted(f"{s} {r} ({a})" for s, r, a in truth - listed)
                accounts = {a for s, _, a in listed if s == "leaking"}
                true_accounts = {a for s, _, a in truth if s == "leaking"}
                total += 1
                cleared += bool(missed)
                kept_runs += kept
                print(
                    f"| {seed} | {rid} {column} | {'yes' if kept else 'no'} | "
                    f"{', '.join(missed) or '–'} | {len(accounts)} / {len(true_accounts)} |"
                )
                sys.stdout.flush()
    print(
        f"\n{total} outputs delayed by {args.delay_us} µs: {cleared} left a true party off "
        f"the lists; after {total - kept_runs} the node kept no run (it clears nobody)."
    )


if __name__ == "__main__":
    main()
