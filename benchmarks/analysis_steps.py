"""CPU seconds of each step of the analysis, per node and per event, on a case database.

Usage: PYTHONPATH=. python benchmarks/analysis_steps.py CASE.duckdb [--repeat 3]

CASE.duckdb: an ingested case, e.g. the one `kvforensics bench --keep --workdir DIR` leaves in
DIR/kvf-bench-*/. The analysis runs on a copy (the case is not changed), nodes one after another
in this process: fetching and ordering each node's events, slot ranges into cells, the compiled
sweep (loading the compiled code timed apart, on a node of one event; then the best of --repeat
calls per node), run numbering of the exposure pieces, read counts, folding the exposure pieces
into runs and storing the findings; then
each SQL script after the sweep, best of --repeat runs, and screening. Prints process CPU
seconds and CPU microseconds per event, so that two mixes can be compared step by step.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from forensics.analysis import aggregate, order
from forensics.analysis.codes import code_lists
from forensics.analysis.coverage import read_counts, run_numbers
from forensics.analysis.screening import ScreeningParams, screen
from forensics.analysis.sweep import READ, Cells, cells_of, sweep_cells_of
from forensics.casedb.sql import run_script, sql
from forensics.db import connect

AFTER_SWEEP = ("analysis/piece_events", *aggregate.LEDGER_QUERIES)


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _one_event() -> tuple[np.ndarray, np.ndarray, Cells, np.ndarray]:
    """A node of one read, for a first call that only loads the compiled code."""
    one = np.zeros(1, np.int32)
    return one, np.full(1, READ, np.int8), cells_of(one, one + 1), one - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "case.duckdb"
        shutil.copy(args.db, copy)
        con = connect(copy)
        steps: dict[str, float] = defaultdict(float)
        events = 0
        con.begin()
        aggregate.prepare(con)
        order.prepare_pieces(con)
        t = cpu()
        sweep_cells_of(*_one_event())
        steps["loading the compiled sweep (a first call)"] = cpu() - t
        for info in order.node_list(con):
            t = cpu()
            ev = order.load_node(con, info)
            steps["fetch and order"] += cpu() - t
            events += len(ev.req)
            end, start = ev.slots.pop(), ev.slots.pop()
            t = cpu()
            cells = cells_of(start, end)
            steps["cells_of"] += cpu() - t
            best = float("inf")
            for _ in range(max(1, args.repeat)):
                t = cpu()
                ex, cat, vio = sweep_cells_of(ev.req, ev.op, cells, ev.content_hash)
                best = min(best, cpu() - t)
            steps["sweep (best of --repeat)"] += best
            t = cpu()
            receiver, leaker = ev.req[ex[:, 0]], ev.req[ex[:, 3]]
            run_numbers((receiver, leaker, ex[:, 4]), ex[:, 1], ex[:, 2])
            steps["run_numbers"] += cpu() - t
            t = cpu()
            read_counts(ev.req, ev.op, cat, cells.bounds)
            steps["read_counts"] += cpu() - t
            print(
                f"{info.node}: {len(ev.req):,} events, {len(cells.bounds) - 1:,} cells, "
                f"{len(ex):,} exposure pieces, {len(cat):,} category rows"
            )
        print("folding and storing the findings (with a third sweep, not counted)")
        for info in order.node_list(con):
            found = order.find_on_node(order.load_node(con, info))
            t = cpu()
            order.store_findings(con, found)
            steps["folding runs, storing the findings"] += cpu() - t
        for name in AFTER_SWEEP:
            best = float("inf")
            for _ in range(max(1, args.repeat)):
                t = cpu()
                run_script(con, sql(name), code_lists())
                best = min(best, cpu() - t)
            steps[name] = best
        t = cpu()
        screen(con, ScreeningParams())
        steps["screening"] = cpu() - t
        con.rollback()
        con.close()
    print(f"\n{events:,} events\n{'step':46s} {'CPU s':>8s} {'CPU µs/event':>13s}")
    for name, seconds in steps.items():
        print(f"{name:46s} {seconds:8.3f} {seconds / max(1, events) * 1e6:13.3f}")


if __name__ == "__main__":
    main()
