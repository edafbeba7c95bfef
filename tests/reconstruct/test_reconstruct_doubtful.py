"""A logged step that may be one step's outputs logged apart (steps.doubtful) is also run as
such, and real vLLM runs with an output logged late (tests/data/vllm-loaded: on a loaded
machine; tests/data/vllm-delayed: a short prefill's first token moved 1.4 ms by hand;
tests/data/vllm-split-step: a completion so moved, which read as it is fits no run; truth
from their tapped ledgers) list every true party, from runs kept. Needs the engines
environment for those."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from support.engines import engines_python
from support.paths import REPO
from support.traces import MS, req

from forensics.cli import run as cli
from forensics.db import connect
from forensics.reconstruct.steps import doubtful, merge_gap, steps

CASES = [
    REPO / "tests" / "data" / name for name in ("vllm-loaded", "vllm-delayed", "vllm-split-step")
]


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
    # a delayed output moves its request a step late whatever the step computed: a one-token
    # prefill (a stub, the rest counted cached) or a completion is as doubtful
    reqs[4] = replace(reqs[4], cached_tokens=199)
    assert doubtful(reqs, clusters) == [k]
    reqs[4] = late  # logged with its step; `c`'s completion logged 1.4 ms late instead
    reqs[2] = replace(reqs[2], completed_us=30 * MS + 1_400)
    clusters = steps(reqs, merge_gap(reqs, 5 * MS))
    assert clusters[k + 1 : k + 3] == [30 * MS + 1_400, 37 * MS]
    assert doubtful(reqs, clusters) == [k]


@pytest.mark.parametrize("data", CASES, ids=lambda p: p.name)
def test_a_real_run_with_an_output_logged_late_lists_every_true_party(
    data: Path, tmp_path: Path
) -> None:
    engines_python()
    case = tmp_path / "case"
    shutil.copytree(data / "case", case)
    db = tmp_path / "case.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
    cli(["analyze", "--db", str(db)])
    con = connect(db)
    listed = set(
        con.execute("SELECT side, request_id, account_id FROM affected_requests").fetchall()
    )
    variants, kept = con.execute("SELECT variants, consistent FROM reconstructed_nodes").fetchall()[
        0
    ]
    con.close()
    truth = {tuple(r) for r in json.loads((data / "truth.json").read_text())["affected"]}
    assert truth <= listed, truth - listed
    assert "also run as the step before's outputs logged apart" in variants
    assert kept, variants
