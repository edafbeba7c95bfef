"""The analysis against the simulator's ground truth (taken from its own engine state, not from
the analysis): every bug switch alone, all together and none, exactly."""

from __future__ import annotations

import pytest
from support.simtruth import ACCOUNT, CONFIGS, EXPOSURE, VIOLATION
from support.simtruth import got as _got
from support.simtruth import truth as _truth

from forensics.analysis.stage import analyze
from forensics.db import connect
from forensics.ingest.load import ingest_case
from forensics.simulate.run import SimOptions, simulate


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda c: "+".join(c) or "none")
def case(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("sim") / "case"
    bugs = frozenset(request.param) or frozenset({"none"})
    rates = (
        ("late_transfer_rate", 0.3),
        ("double_alloc_rate", 0.3),
        ("prefix_collision_rate", 0.3),
    )  # frequent, so a small case shows every bug
    simulate(
        folder,
        SimOptions(requests=150, seed=11, scale=0.001, bugs=bugs, contents=False, overrides=rates),
    )
    db = folder.parent / "case.duckdb"
    ingest_case(folder, db)
    con = connect(db)
    analyze(con)
    return folder, con


def test_exposures_match_the_ground_truth(case) -> None:
    folder, con = case
    truth = _truth(folder, "exposures.csv", EXPOSURE)
    assert _got(con, f"SELECT {', '.join(EXPOSURE)} FROM exposures") == truth


def test_violations_match_the_ground_truth(case) -> None:
    folder, con = case
    truth = _truth(folder, "violations.csv", VIOLATION)
    assert _got(con, f"SELECT {', '.join(VIOLATION)} FROM violations") == truth


def test_accounts_match_the_ground_truth(case) -> None:
    folder, con = case
    truth = _truth(folder, "accounts.csv", ACCOUNT)
    got = _got(
        con, f"SELECT {', '.join(ACCOUNT)} FROM affected_accounts WHERE confidence = 'ledger'"
    )
    assert got == truth


EXPECTED = {  # what each switch must produce in these cases, so the checks above bite
    "oversize-stub": ({"stale"}, set()),
    "late-transfer": (set(), {"write-after-free"}),
    "double-alloc": (set(), set()),  # rare at this size: checked only through the truth above
    "prefix-collision": ({"prefix-mismatch"}, set()),
}


def test_the_cases_exercise_what_they_switch_on(case, request) -> None:
    _folder, con = case
    kinds = {k for (k,) in con.execute("SELECT DISTINCT kind FROM exposures").fetchall()}
    found = {v for (v,) in con.execute("SELECT DISTINCT violation FROM violations").fetchall()}
    switched = request.node.callspec.id.split("+")
    for bug in switched:
        want_kinds, want_violations = EXPECTED.get(bug, (set(), set()))
        assert want_kinds <= kinds and want_violations <= found, (bug, kinds, found)
    if switched == ["none"]:
        assert not kinds and not found
