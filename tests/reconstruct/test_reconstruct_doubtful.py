"""A logged step that may be one step's outputs logged apart (steps.doubtful) is also run as
such, and a real vLLM run logged on a loaded machine (tests/data/vllm-loaded, truth from its
tapped ledger) lists every true party. Needs the engines environment for the second."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from support.engines import engines_python
from support.paths import REPO
from support.traces import MS, req

from forensics.cli import run as cli
from forensics.db import connect
from forensics.reconstruct.steps import doubtful, merge_gap, steps

CASE = REPO / "tests" / "data" / "vllm-loaded"


def test_an_output_logged_late_within_a_step_is_doubtful_and_a_step_is_not() -> None:
    """Requests decoding at 6 ms per token; `late`'s first token (a 200-token prefill) is
    logged 1.4 ms after the outputs of the step at 30 ms (the logging held up), `next`'s
    5.6 ms after that: only the first boundary is doubtful."""
    late = req("late", "acct-3", 20, 30, 78, 200, 9)  # a 200-token prefill
    reqs = [
        req("a", "acct-0", 0, 0, 60, 16, 11),  # 6 ms per token, across both boundaries
        req("b", "acct-1", 0, 6, 66, 16, 11),
        req("c", "acct-2", 0, 12, 30, 16, 4),  # completes at 30
        replace(req("d", "acct-1", 20, 30, 78, 16, 9), first_token_us=30 * MS + 2),
        replace(late, first_token_us=30 * MS + 1_400),
        req("next", "acct-0", 30, 37, 85, 16, 9),
    ]
    clusters = steps(reqs, merge_gap(reqs, 5 * MS))
    k = clusters.index(30 * MS)
    assert clusters[k + 1 : k + 3] == [30 * MS + 1_400, 37 * MS]
    assert doubtful(reqs, clusters) == [k]
    # the same step prefilling one token (a stub, the rest counted cached) is taken as a step
    reqs[4] = replace(reqs[4], cached_tokens=199)
    assert doubtful(reqs, clusters) == []


def test_a_real_run_logged_on_a_loaded_machine_lists_every_true_party(tmp_path: Path) -> None:
    engines_python()
    case = tmp_path / "case"
    shutil.copytree(CASE / "case", case)
    db = tmp_path / "case.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
    cli(["analyze", "--db", str(db)])
    con = connect(db)
    listed = set(
        con.execute("SELECT side, request_id, account_id FROM affected_requests").fetchall()
    )
    (variants,) = con.execute("SELECT variants FROM reconstructed_nodes").fetchall()[0]
    con.close()
    truth = {tuple(r) for r in json.loads((CASE / "truth.json").read_text())["affected"]}
    assert truth <= listed, truth - listed
    assert "also run as the step before's outputs logged apart" in variants
