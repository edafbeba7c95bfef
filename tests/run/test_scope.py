"""--since, --until and --account: the lists, the figures and the report cover only the
exposures in scope, counted against a naive filter of the sample incident's ground truth; a
scope that holds nothing says so (never an all-clear); bad times exit 2."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.paths import SAMPLE
from support.report_oracle import headline_from_exposures, parse

from forensics.cli import run


def _runs() -> list[dict[str, Any]]:
    return [
        {
            **e,
            "slot_start": int(e["slot_start"]),
            "slot_count": int(e["slot_count"]),
            "cross_account": e["cross_account"] == "true",
            "read": datetime.fromisoformat(e["first_read_at"].replace("Z", "+00:00")),
        }
        for e in csv.DictReader((SAMPLE / "ground_truth" / "exposures.csv").open())
    ]


def _expected(keep: Any) -> dict[str, int]:
    """The figures of the runs whose (receiver, leaker, node) pair `keep` accepts, given the
    pair's first read and its two accounts."""
    runs = _runs()
    first: dict[tuple[str, str, str], datetime] = {}
    for e in runs:
        key = (e["receiver_request_id"], e["leaker_request_id"], e["node"])
        first[key] = min(first.get(key, e["read"]), e["read"])
    chosen = [
        e
        for e in runs
        if keep(
            first[(e["receiver_request_id"], e["leaker_request_id"], e["node"])],
            e["receiver_account_id"],
            e["leaker_account_id"],
        )
    ]
    found = headline_from_exposures(chosen)
    found.pop("confirmed_requests")
    return found


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scope") / "case.duckdb"
    assert run(["ingest", str(SAMPLE), "--db", str(path)]) in (0, 1)
    assert run(["analyze", "--db", str(path)]) == 1
    return path


def _report(cli: Any, db: Path, out: Path, *scope: str) -> tuple[int, dict[str, Any], str]:
    code, stdout, stderr = cli("report", "--db", db, "--out", out, "--json", *scope)
    return code, (json.loads(stdout) if stdout.strip() else {}), stderr


def _check(out: Path, figures: dict[str, Any], expected: dict[str, int]) -> None:
    for name, value in expected.items():
        assert figures[name] == value, name
    # a complete ledger: the lists hold the cross-account figures, row by row
    rows = list(csv.DictReader((out / "notifications" / "affected_requests.csv").open()))
    assert sum(r["side"] == "receiving" for r in rows) == expected["receiving_requests"]
    assert sum(r["side"] == "leaking" for r in rows) == expected["leaking_requests"]
    accounts = list(csv.DictReader((out / "notifications" / "receiving_accounts.csv").open()))
    assert len(accounts) == expected["receiving_accounts"]
    assert sum(int(a["tokens"]) for a in accounts) == expected["cross_tokens"]
    page = parse((out / "report.html").read_text(encoding="utf-8"))
    for name, value in expected.items():
        assert int(page.figures[name]) == value, name


def test_a_period_covers_the_reads_in_it(db: Path, tmp_path: Path, cli: Any) -> None:
    times = sorted({e["read"] for e in _runs()})
    since, until = times[len(times) // 3], times[2 * len(times) // 3]
    expected = _expected(lambda read, *_: since <= read < until)
    assert 0 < expected["receiving_requests"] < _expected(lambda *_: True)["receiving_requests"]
    epoch_us = int((until - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)
    out = tmp_path / "out"
    code, result, _ = _report(cli, db, out, "--since", since.isoformat(), "--until", str(epoch_us))
    assert code == 1
    _check(out, result["figures"], expected)
    assert result["scope_filter"]["since"] == since.isoformat(timespec="microseconds").replace(
        "+00:00", "Z"
    )
    assert result["scope_filter"]["matched_nothing"] is False
    summary = json.loads((out / "notifications" / "summary.json").read_text())
    assert summary["scope_filter"] == result["scope_filter"]
    header = parse((out / "report.html").read_text(encoding="utf-8"))
    shown = [a["data-scope"] for t, a in header.tags if t == "p" and a.get("id") == "scope"]
    assert shown and "receiving reads from" in str(shown[0])


def test_accounts_cover_either_side(db: Path, tmp_path: Path, cli: Any) -> None:
    chosen = {"acct-0001", "acct-0006"}
    expected = _expected(lambda _read, r, w: r in chosen or w in chosen)
    out = tmp_path / "out"
    code, result, _ = _report(cli, db, out, "--account", "acct-0001", "--account", "acct-0006")
    assert code == 1
    _check(out, result["figures"], expected)
    assert result["scope_filter"]["accounts"] == sorted(chosen)


def test_a_scope_that_holds_nothing_says_so(db: Path, tmp_path: Path, cli: Any) -> None:
    out = tmp_path / "out"
    code, result, _ = _report(cli, db, out, "--since", "2030-01-01T00:00:00Z")
    assert code == 0
    assert result["scope_filter"]["matched_nothing"] is True
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'data-evidence="scope-empty"' in html
    assert 'data-evidence="ledger"' not in html  # not "the ledgers show no exposure"
    code, stdout, stderr = cli("report", "--db", db, "--out", tmp_path / "o2", "--account", "x")
    assert code == 0 and "held nothing" in stdout + stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--since", "yesterday"], "--since 'yesterday' is not an ISO-8601 time"),
        (["--until", "2026-09-04T00:00:00"], "has no UTC offset"),
        (["--since", "2026-09-05T00:00:00Z", "--until", "2026-09-04T00:00:00Z"], "is not after"),
    ],
)
def test_bad_scopes_exit_2(db: Path, tmp_path: Path, cli: Any, args: list[str], words: str) -> None:
    code, _, stderr = cli("report", "--db", db, "--out", tmp_path / "out", *args)
    assert code == 2 and words in " ".join(stderr.split())
    assert not (tmp_path / "out").exists()
