"""The hand-worked examples in the shared examples folder come out exactly: exposures,
violations and accounts (docs/DESIGN.md §4 and §6)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from support.paths import EXAMPLES

from forensics.analysis.stage import analyze
from forensics.cli import run
from forensics.db import connect
from forensics.ingest.load import ingest_case

CASES = ("semantics-seq", "semantics-ties")


def _expected(case: str, name: str) -> set[tuple]:
    with open(EXAMPLES / case / f"expected_{name}.csv", newline="") as f:
        return {tuple(v if v != "" else None for v in row.values()) for row in csv.DictReader(f)}


def _strings(rows: list[tuple]) -> set[tuple]:
    return {tuple(None if v is None else str(v) for v in row) for row in rows}


@pytest.fixture(scope="module", params=CASES)
def analysed(request, tmp_path_factory) -> tuple[str, Path]:
    db = tmp_path_factory.mktemp(request.param) / "case.duckdb"
    ingest_case(EXAMPLES / request.param, db)
    assert run(["analyze", "--db", str(db)]) == 1  # findings: exit code 1
    return request.param, db


def test_exposures(analysed) -> None:
    case, db = analysed
    con = connect(db, read_only=True)
    rows = con.execute(
        "SELECT receiver_request_id, leaker_request_id, node, slot_start, "
        "slot_count, kind FROM exposures"
    ).fetchall()
    assert _strings(rows) == _expected(case, "exposures")


def test_violations(analysed) -> None:
    case, db = analysed
    con = connect(db, read_only=True)
    rows = con.execute(
        "SELECT request_id, node, slot_start, slot_count, violation, "
        "other_request_id FROM violations"
    ).fetchall()
    assert _strings(rows) == _expected(case, "violations")


def test_accounts(analysed) -> None:
    case, db = analysed
    con = connect(db, read_only=True)
    rows = con.execute("SELECT side, account_id, requests, tokens FROM affected_accounts")
    assert _strings(rows.fetchall()) == _expected(case, "accounts")


def test_uninitialised_reads_are_counted_not_exposed(tmp_path) -> None:
    db = tmp_path / "case.duckdb"
    ingest_case(EXAMPLES / "semantics-seq", db)
    con = connect(db)
    analyze(con)
    row = con.execute(
        "SELECT own_slots, foreign_slots, uninitialised_slots FROM read_stats "
        "WHERE request_id = 'C'"
    ).fetchone()
    assert row == (1, 0, 7)  # C wrote 1 of its 8 slots; nobody ever wrote the other 7
    stats = dict(con.execute("SELECT request_id, shared_verified FROM read_stats").fetchall())
    assert stats["E"] == 4  # the verified prefix-cache hit


def test_investigate_writes_exposures_and_notification_lists(tmp_path) -> None:
    out = tmp_path / "out"
    assert run(["investigate", str(EXAMPLES / "semantics-seq"), "--out", str(out)]) == 1
    import pyarrow.parquet as pq

    assert pq.read_table(out / "exposures.parquet").num_rows == 4
    with open(out / "notifications" / "receiving_accounts.csv", newline="") as f:
        rows = {r["account_id"]: r for r in csv.DictReader(f)}
    assert {a: (r["requests"], r["tokens"], r["confidence"]) for a, r in rows.items()} == {
        "acct-1": ("1", "2", "ledger"),
        "acct-2": ("1", "6", "ledger"),
        "acct-4": ("1", "2", "ledger"),
        "acct-6": ("1", "4", "ledger"),
    }
    with open(out / "notifications" / "leaking_accounts.csv", newline="") as f:
        assert {r["account_id"] for r in csv.DictReader(f)} == {
            "acct-1",
            "acct-2",
            "acct-4",
            "acct-7",
        }
    first = (out / "notifications" / "leaking_accounts.csv").read_bytes()
    out2 = tmp_path / "again"
    run(["investigate", str(EXAMPLES / "semantics-seq"), "--out", str(out2)])
    assert (out2 / "notifications" / "leaking_accounts.csv").read_bytes() == first
    assert (out2 / "exposures.parquet").read_bytes() == (out / "exposures.parquet").read_bytes()
