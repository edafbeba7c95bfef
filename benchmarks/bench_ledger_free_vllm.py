"""How well the affected parties are found without a ledger on a real vLLM (CPU build).

Each run serves requests on a real vLLM with the ledger tap on (tests/support/vllm_run.py, in the
engines' environment), under batched load (24 requests of 4 accounts, shared 128-token
prefixes, at least 6 in flight, a pool of 40 blocks), outputs sampled (temperature 0.8, top-p
0.95, a seed per request; --sampling greedy for greedy decoding):

- `batched`: one ordinary request runs as a 1-token stub whose uncomputed prompt the engine
  counts as cached;
- `batched-dup`: a block handed out while its holder still holds it (`dup-12` writes over the
  first positions of `victim-10`, which goes on reading them);
- `batched-collision`: a prefix-cache hash collision (`collide-14` is served another
  account's cached block for its first 32 positions);
- `healthy-batched`: no fault.

The truth is the analysis of the tapped ledger. Then the ledger, the contents and the tap's reports
are withheld, leaving what the engine and the gateway give (the request log with each
response's cached tokens, the accounts, the node facts), and the lists are scored against the
truth, per side and unit:

- screening:     `analyze` alone;
- reconstructed: `reconstruct` (the unified node rebuilt on vLLM's own KVCacheManager with
                 prefix caching, forensics/reconstruct/unified.py) then `analyze`.

Prints a Markdown table: one row per (case, seed, method, side) with the true and listed
counts, precision and recall of requests and of accounts.

    PYTHONPATH=. python benchmarks/bench_ledger_free_vllm.py [--seeds 7 8] [--stub-at 21]
        [--modes batched batched-dup batched-collision healthy-batched]
        [--sampling sampled|greedy] [--workdir DIR] [--reuse] [--limits SEQS [BATCHED]]
        [--via engine|http] [--delivery-jitter-ms MS|measured] [--round-ms]

--limits sets the engine's max_num_seqs and max_num_batched_tokens (default 8 and vLLM's): with
fewer seats than requests in flight requests wait, with a budget below the prompts' lengths
prefills are chunked over steps. The engine's log (its start-up lines name the limits) is kept
as the case's logs/vllm-0.log.

--via http serves the same load through vLLM's own OpenAI-compatible server instead
(tests/support/vllm_http_run.py: `batched` and `healthy-batched` only): the engine core in a
process of its own, each request sent over HTTP at its own wall-clock time and streamed, the
gateway log written from what the client saw (send time, first streamed token, last chunk,
the usage's cached tokens), so the engine's steps are known to nobody but the engine.

--delivery-jitter-ms is stated to `reconstruct`: a number, or `measured` for what the run's own
steps needed (`kvforensics jitter` on its tapped ledger) plus 0.5 ms, the bound a responder who
measured their gateway would state. Without it, a node whose logged times do not mark its steps
(every run through the server) clears nobody.

--round-ms writes the withheld request log's times to the millisecond (cut, as a gateway that
logs milliseconds writes them); `measured` then states 1 ms more, the rounding.

--unnamed writes the withheld case as a gateway and an engine that name nothing alike would: the
request log without its `node` column, the engine's log as `logs/engine.log`, and no nodes
file (the tap writes it), so that the one engine is known only from its log.

BATCHED_REQUESTS and BATCHED_ACCOUNTS in the environment change the load's size (default 24
requests of 4 accounts; tests/support/vllm_run.py).

--reuse keeps a run already served in --workdir (its case folder with run.json) and only
scores it again.

It needs the engines' environment (scripts/engines_venv.sh, KVFORENSICS_ENGINES_VENV); each
engine run takes about a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from forensics.analysis.stage import analyze
from forensics.casedb.sql import sql
from forensics.db import connect
from forensics.engines.client import engines_python
from forensics.ingest.load import ingest_case
from forensics.options import Allocator, ReconstructOptions
from forensics.reconstruct.delivery import measure_delivery
from forensics.reconstruct.stage import reconstruct

ROOT = Path(__file__).resolve().parents[1]
SIDES = ("receiving", "leaking")
UNITS = ("requests", "accounts")
WITHHELD = ("kv_events", "contents", "tap")


MODES = ("batched", "batched-dup", "batched-collision", "healthy-batched")
Row = tuple[str, int, str, str, dict[str, tuple[int, int, float | None, float | None]]]


def serve(  # noqa: PLR0913
    mode: str,
    seed: int,
    stub_at: int,
    sampling: str,
    model: Path,
    case: Path,
    limits: list[str],
    via: str = "engine",
) -> float:
    """Run the engine with the tap on; the seconds it took. The engine's own log (its stderr)
    (vLLM logs to stdout, warnings go to stderr) is kept as the case's logs/vllm-0.log, as a
    deployment keeps it."""
    env = {
        **os.environ,
        "KVFORENSICS_TAP_DIR": str(case),
        "KVFORENSICS_TAP_NODE": "vllm-0",
        "KVFORENSICS_TAP_CONTENTS": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_RUN_SEED": str(seed),
        "BATCHED_STUB_AT": str(stub_at),
        "VLLM_RUN_SAMPLING": sampling,
        "PYTHONPATH": str(ROOT),
        **dict(zip(("VLLM_RUN_MAX_SEQS", "VLLM_RUN_MAX_BATCHED"), limits, strict=False)),
    }
    script = "vllm_http_run.py" if via == "http" else "vllm_run.py"
    python = sys.executable if via == "http" else str(engines_python())
    cmd = [python, str(ROOT / "tests" / "support" / script), mode, str(model), str(case)]
    t0 = time.perf_counter()
    done = subprocess.run(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(f"the engine run failed:\n{done.stdout[-3000:]}")
    if via == "http":  # the server's own output is the log; the script wrote it
        return time.perf_counter() - t0
    (case / "logs").mkdir(exist_ok=True)
    (case / "logs" / "vllm-0.log").write_text(done.stdout)
    return time.perf_counter() - t0


def listed(db: Path) -> dict[tuple[str, str], set[str]]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(sql("bench/found_pairs")).fetchall()
    out: dict[tuple[str, str], set[str]] = {(s, u): set() for s in SIDES for u in UNITS}
    for side, request, account in rows:
        out[(side, "requests")].add(request)
        out[(side, "accounts")].add(account)
    return out


def named(lists: dict[tuple[str, str], set[str]]) -> str:
    """The requests listed on each side, for reading the figures."""
    return "; ".join(f"{side} {sorted(lists[(side, 'requests')])}" for side in SIDES)


def flagged(db: Path) -> str:
    """What screening flagged, with its reasons."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT request_id, reasons FROM screening WHERE len(reasons) > 0 ORDER BY 1"
        ).fetchall()
    return "screening flagged " + (", ".join(f"{r} {'/'.join(w)}" for r, w in rows) or "none")


def analysed(
    case: Path, db: Path, rebuild: bool, jitter_ms: float | None = None
) -> dict[tuple[str, str], set[str]]:
    ingest_case(case, db)
    con = connect(db)
    try:
        if rebuild:
            options = ReconstructOptions(allocator=Allocator.VLLM, delivery_jitter_ms=jitter_ms)
            reconstruct(con, options)
        analyze(con)
    finally:
        con.close()
    return listed(db)


def stated(given: str | None, truth_db: Path, rounded: bool = False) -> float | None:
    """The delivery jitter stated to reconstruct (`--delivery-jitter-ms`)."""
    if given != "measured":
        return None if given is None else float(given)
    with duckdb.connect(str(truth_db), read_only=True) as con:
        (node,) = measure_delivery(con)
    return (node.needed_us + 500 + (1000 if rounded else 0)) / 1000


def to_the_ms(log: Path) -> None:
    """The request log's times cut to the millisecond, in place."""
    with log.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows, log
    for row in rows:
        for col in ("received_at", "first_token_at", "completed_at"):
            if row[col]:
                t = dt.datetime.fromisoformat(row[col])
                row[col] = t.replace(microsecond=t.microsecond // 1000 * 1000).isoformat(
                    timespec="milliseconds"
                )
    with log.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def unnamed(case: Path) -> None:
    """The case's request log without its node column, its engine log renamed engine.log, its
    nodes file removed, in place (one engine: the case has one log)."""
    log = case / "requests.csv"
    with log.open(newline="") as f:
        rows = list(csv.DictReader(f))
    with log.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "node"])
        writer.writeheader()
        writer.writerows({k: v for k, v in r.items() if k != "node"} for r in rows)
    (engine_log,) = (case / "logs").iterdir()
    engine_log.rename(case / "logs" / "engine.log")
    shutil.rmtree(case / "nodes", ignore_errors=True)


def rebuilt(jitter: float | None) -> str:
    return "no delivery jitter stated" if jitter is None else f"{jitter:.2f} ms of jitter stated"


def score(found: set[str], truth: set[str]) -> tuple[float | None, float | None]:
    hit = len(found & truth)
    precision = hit / len(found) if found else None
    recall = hit / len(truth) if truth else None
    return precision, recall


def fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def table(rows: list[Row]) -> str:
    head = (
        "| case | seed | method | side | requests true / listed | precision | recall "
        "| accounts true / listed | precision | recall |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for case, seed, method, side, units in rows:
        cells = [case, str(seed), method, side]
        for unit in UNITS:
            n_true, n_found, p, r = units[unit]
            cells += [f"{n_true} / {n_found}", fmt(p), fmt(r)]
        lines.append("| " + " | ".join(cells) + " |\n")
    return head + "".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 8])
    ap.add_argument("--stub-at", type=int, default=21)
    ap.add_argument("--modes", nargs="+", default=list(MODES))
    ap.add_argument("--sampling", choices=("sampled", "greedy"), default="sampled")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--reuse", action="store_true", help="score runs already in --workdir")
    ap.add_argument(
        "--limits",
        nargs="+",
        default=[],
        metavar="N",
        help="the engine's max_num_seqs, then max_num_batched_tokens (chunked prefill)",
    )
    ap.add_argument("--via", choices=("engine", "http"), default="engine")
    ap.add_argument(
        "--delivery-jitter-ms",
        default=None,
        help="stated to reconstruct: a number, or 'measured' (what the run's own steps needed, "
        "from its tapped ledger, plus 0.5 ms); default: none stated",
    )
    ap.add_argument("--round-ms", action="store_true", help="log times to the millisecond")
    ap.add_argument(
        "--unnamed", action="store_true", help="no node column, the log as engine.log, no nodes"
    )
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kvf-ledger-free-"))
    model = work / "tiny-llama"
    rows: list[Row] = []
    for mode in args.modes:
        for seed in args.seeds:
            run = work / f"{mode}-{seed}"
            seconds = 0.0
            if not (args.reuse and (run / "case" / "run.json").is_file()):
                shutil.rmtree(run, ignore_errors=True)
                case = run / "case"
                seconds = serve(
                    mode, seed, args.stub_at, args.sampling, model, case, args.limits, args.via
                )
            shutil.rmtree(run / "withheld", ignore_errors=True)
            for db in run.glob("*.duckdb*"):
                db.unlink()
            truth = analysed(run / "case", run / "truth.duckdb", rebuild=False)
            jitter = stated(args.delivery_jitter_ms, run / "truth.duckdb", args.round_ms)
            withheld = run / "withheld"
            shutil.copytree(run / "case", withheld, ignore=shutil.ignore_patterns(*WITHHELD))
            if args.round_ms:
                to_the_ms(withheld / "requests.csv")
            if args.unnamed:
                unnamed(withheld)
            print(f"{mode} seed {seed}: engine {seconds:.0f} s; {rebuilt(jitter)}", flush=True)
            print(f"  truth: {named(truth)}", flush=True)
            for method, rebuild in (("screening", False), ("reconstructed", True)):
                found = analysed(withheld, run / f"{method}.duckdb", rebuild, jitter)
                print(f"  {method}: {named(found)}; {flagged(run / f'{method}.duckdb')}")
                for side in SIDES:
                    units = {
                        unit: (
                            len(truth[(side, unit)]),
                            len(found[(side, unit)]),
                            *score(found[(side, unit)], truth[(side, unit)]),
                        )
                        for unit in UNITS
                    }
                    rows.append((mode, seed, method, side, units))
    print()
    print(table(rows), end="")


if __name__ == "__main__":
    main()
