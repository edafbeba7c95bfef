"""One set of numbers: the figures of `investigate --json` (the analyze stage's and the export
stage's), the analyze line, report.html's marked figures, the timeline's buckets,
notifications/summary.json and the lists' own rows all agree, and equal a naive count of the
ground truth's exposure runs. On the sample incident and on a simulated case with few accounts,
so that many exposures are between requests of one account."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from support.paths import SAMPLE
from support.report_oracle import headline_from_exposures, parse

from forensics.options import SimOptions
from forensics.simulate.run import simulate

# The figures the naive oracle computes, and the cross-account ones the lists must hold.
LISTED = {
    "listed_receiving_requests": "receiving_requests",
    "listed_receiving_accounts": "receiving_accounts",
    "listed_leaking_requests": "leaking_requests",
    "listed_leaking_accounts": "leaking_accounts",
}


def _truth(case: Path) -> dict[str, int]:
    """Naive figures (tests/support/report_oracle.py: slots exploded one by one) from the ground
    truth's exposure runs; replay's confirmations are not the ground truth's to say."""
    runs = [
        {
            **e,
            "slot_start": int(e["slot_start"]),
            "slot_count": int(e["slot_count"]),
            "cross_account": e["cross_account"] == "true",
        }
        for e in csv.DictReader((case / "ground_truth" / "exposures.csv").open())
    ]
    found = headline_from_exposures(runs)
    found.pop("confirmed_requests")
    return found


def _lists(out: Path) -> dict[str, int]:
    """The figures as the lists' CSV files hold them: rows and sums."""
    notes = out / "notifications"
    requests = list(csv.DictReader((notes / "affected_requests.csv").open()))
    receiving = list(csv.DictReader((notes / "receiving_accounts.csv").open()))
    leaking = list(csv.DictReader((notes / "leaking_accounts.csv").open()))
    return {
        "listed_receiving_requests": sum(r["side"] == "receiving" for r in requests),
        "listed_leaking_requests": sum(r["side"] == "leaking" for r in requests),
        "listed_receiving_accounts": len(receiving),
        "listed_leaking_accounts": len(leaking),
        "cross_tokens": sum(int(r["tokens"] or 0) for r in receiving),
        "leaking_tokens": sum(int(r["tokens"] or 0) for r in leaking),
    }


def _simulated(root: Path) -> Path:
    case = root / "sim"
    simulate(
        case,
        SimOptions(requests=160, seed=5, scale=0.001, contents=False, overrides=(("accounts", 3),)),
    )
    return case


@pytest.mark.parametrize("which", ["sample", "simulated"])
def test_every_output_shows_the_same_figures(tmp_path: Path, cli: Any, which: str) -> None:
    case = SAMPLE if which == "sample" else _simulated(tmp_path)
    truth = _truth(case)
    assert truth["same_account_runs"] > 0  # both cases have same-account exposures
    out = tmp_path / "out"
    code, stdout, _ = cli("investigate", case, "--out", out, "--json")
    assert code in (0, 1), stdout
    stages = json.loads(stdout)["stages"]
    figures = stages["export"]["figures"]
    before_replay = stages["analyze"]["figures"]
    for name, value in truth.items():
        assert figures[name] == value, name
        assert before_replay[name] == value, name
    for listed, ledger in LISTED.items():  # a complete ledger: the lists hold what it shows
        assert figures[listed] == truth[ledger], listed
    # the lists, row by row
    lists = _lists(out)
    for name in LISTED:
        assert lists[name] == figures[name], name
    assert lists["cross_tokens"] == lists["leaking_tokens"] == figures["cross_tokens"]
    # notifications/summary.json and the report's marked elements
    summary = json.loads((out / "notifications" / "summary.json").read_text())
    assert summary["figures"] == figures
    page = parse((out / "report.html").read_text(encoding="utf-8"))
    for name in (*truth, *LISTED):
        assert int(page.figures[name]) == figures[name], name
        assert page.shown[name].strip().replace(",", "") == str(figures[name]), name
    # the timeline's buckets add up to the headline's cross-account tokens
    buckets = [int(v) for _, a in page.tags if (v := a.get("data-bucket-tokens")) is not None]
    assert sum(buckets) == int(page.figures["timeline_tokens"]) == figures["cross_tokens"]
    # the terminal lines word the same figures
    words = (
        f"to notify (cross-account): receiving {figures['listed_receiving_requests']} requests / "
        f"{figures['listed_receiving_accounts']} accounts, leaking "
        f"{figures['listed_leaking_requests']} requests / {figures['listed_leaking_accounts']} "
        f"accounts, {figures['cross_tokens']} tokens; same account (not notified): "
        f"{figures['same_account_receiving_requests']} receiving / "
        f"{figures['same_account_leaking_requests']} leaking requests, "
        f"{figures['same_account_tokens']} tokens"
    )
    assert words in stages["analyze"]["headline"]
    assert words in stages["export"]["headline"]
