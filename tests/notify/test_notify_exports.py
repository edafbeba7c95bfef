"""Notification exports against the hand-worked answers of the semantics-seq example."""

from __future__ import annotations

import csv
import json
import re
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.report_case import (
    AWARE,
    EXAMPLE,
    _exposure,
    add_rows,
    build_case,
    every_schema,
    seq_tables,
    t,
)

from forensics.report.casedb import open_case
from forensics.report.render import STAGE_OF_TABLE
from forensics.report.stage import write_all


def _run(tmp_path: Path, tables: dict, aware_at: datetime | None = AWARE, **kw: object) -> Path:
    db = build_case(tmp_path / "case.duckdb", tables)
    out = tmp_path / "out"
    con = open_case(db)
    write_all(con, out, aware_at=aware_at, case_label="seq", **kw)  # type: ignore[arg-type]
    con.close()
    return out / "notifications"


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def seq_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("seq"), seq_tables())


def test_accounts_match_the_hand_worked_answers(seq_out: Path) -> None:
    expected = {
        (r["side"], r["account_id"]): (int(r["requests"]), int(r["tokens"]))
        for r in _read_csv(EXAMPLE / "expected_accounts.csv")
    }
    got = {}
    for side in ("receiving", "leaking"):
        for row in _read_csv(seq_out / f"{side}_accounts.csv"):
            assert row["side"] == side
            got[(side, row["account_id"])] = (int(row["requests"]), int(row["tokens"]))
    assert got == expected


def test_requests_one_row_per_side_and_request(seq_out: Path) -> None:
    rows = _read_csv(seq_out / "affected_requests.csv")
    pairs = sorted((r["side"], r["request_id"], r["account_id"], int(r["tokens"])) for r in rows)
    assert pairs == sorted(
        [
            ("receiving", "B", "acct-2", 6),
            ("receiving", "F", "acct-6", 4),
            ("receiving", "D", "acct-4", 2),
            ("receiving", "H", "acct-1", 2),
            ("leaking", "A", "acct-1", 6),
            ("leaking", "D", "acct-4", 4),
            ("leaking", "G", "acct-7", 2),
            ("leaking", "B", "acct-2", 2),
        ]
    )
    assert {r["counterpart_accounts"] for r in rows} == {"1"}
    assert {r["confidence"] for r in rows} == {"ledger"}


def test_directory_fields_and_times(seq_out: Path) -> None:
    rows = {r["account_id"]: r for r in _read_csv(seq_out / "leaking_accounts.csv")}
    seven = rows["acct-7"]
    assert seven["name"] == "Seven <script>alert(7)</script>"  # data, escaped only in HTML
    assert seven["contact_email"] == "security@seven.example"
    assert seven["jurisdiction"] == "EU"
    assert seven["first_affected_at"] == "2026-08-27T10:00:06.000100Z"


# notify_by per jurisdiction for awareness at 2026-08-28T07:00Z, worked by hand from rules.csv:
# EU and UK: customer within 24 h, authority within 72 h; US-CA: 30 days; others: 72 h default.
NOTIFY = {
    "acct-1": ("EU", "2026-08-29T07:00:00.000000Z", "2026-08-31T07:00:00.000000Z"),
    "acct-2": ("US-CA", "2026-09-27T07:00:00.000000Z", ""),
    "acct-4": ("UK", "2026-08-29T07:00:00.000000Z", "2026-08-31T07:00:00.000000Z"),
    "acct-6": ("*", "2026-08-31T07:00:00.000000Z", ""),
    "acct-7": ("EU", "2026-08-29T07:00:00.000000Z", "2026-08-31T07:00:00.000000Z"),
}


def test_summary_names_rules_and_missing_stages(seq_out: Path) -> None:
    summary = json.loads((seq_out / "summary.json").read_text())
    assert summary["aware_at"] == "2026-08-28T07:00:00.000000Z"
    assert [r["jurisdiction"] for r in summary["rules_applied"]] == ["*", "EU", "UK", "US-CA"]
    missing = summary["missing_tables"]  # the replay stage did not run: only its tables are missing
    assert "replay_results" in missing and {STAGE_OF_TABLE[t] for t in missing} == {"replay"}
    assert summary["rows"] == {
        "receiving_accounts": 4,
        "leaking_accounts": 4,
        "affected_requests": 8,
    }


def test_notify_by_per_jurisdiction(seq_out: Path) -> None:
    for name in ("receiving_accounts", "leaking_accounts", "affected_requests"):
        for row in _read_csv(seq_out / f"{name}.csv"):
            rule, notify_by, authority = NOTIFY[row["account_id"]]
            assert (row["notify_rule"], row["notify_by"], row["authority_notify_by"]) == (
                rule,
                notify_by,
                authority,
            ), (name, row["account_id"])


def test_without_aware_at_notify_by_is_empty(tmp_path: Path) -> None:
    out = _run(tmp_path, seq_tables(), aware_at=None)
    rows = _read_csv(out / "receiving_accounts.csv")
    assert rows and all(r["notify_by"] == "" and r["authority_notify_by"] == "" for r in rows)
    assert "no awareness time was given" in (out.parent / "report.html").read_text().lower()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["aware_at"] is None and summary["notify_by"].startswith("empty")


def test_rules_file_overrides_and_adds(tmp_path: Path) -> None:
    rules = tmp_path / "rules.csv"
    rules.write_text(
        "jurisdiction,notify_within_hours,authority_within_hours,basis\n"
        "US-NY,48,,NY rule\nEU,12,72,stricter contract\n"
    )
    out = _run(tmp_path, seq_tables(), rules_file=rules)
    got = {r["account_id"]: r for r in _read_csv(out / "receiving_accounts.csv")}
    assert got["acct-6"]["notify_by"] == "2026-08-30T07:00:00.000000Z"  # +48 h
    assert got["acct-6"]["notify_basis"] == "NY rule"
    assert got["acct-1"]["notify_by"] == "2026-08-28T19:00:00.000000Z"  # +12 h
    assert got["acct-2"]["notify_by"] == "2026-09-27T07:00:00.000000Z"  # shipped US-CA kept


def test_formats_agree(seq_out: Path) -> None:
    for name in ("receiving_accounts", "leaking_accounts", "affected_requests"):
        from_csv = _read_csv(seq_out / f"{name}.csv")
        from_json = json.loads((seq_out / f"{name}.json").read_text())
        from_parquet = pq.read_table(seq_out / f"{name}.parquet").to_pylist()
        assert list(from_csv[0]) == list(from_json[0]) == list(from_parquet[0])
        as_text = [{k: "" if v is None else str(v) for k, v in r.items()} for r in from_json]
        assert as_text == from_csv  # (no value here starts like a spreadsheet formula)
        # Parquet holds the instants, JSON the same instants as ISO-8601 text with a Z.
        assert from_parquet == [
            {k: _instant(v) if k in TIMES else v for k, v in r.items()} for r in from_json
        ]


TIMES = ("first_affected_at", "last_affected_at", "notify_by", "authority_notify_by")


def _instant(text: str | None) -> datetime | None:
    if text is None:
        return None
    assert text.endswith("Z"), text
    return datetime.fromisoformat(text[:-1] + "+00:00")


FORBIDDEN = (
    "leaker",
    "receiver",
    "counterpart_account_id",
    "other_",
    "prompt",
    "output",
    "token_ids",
    "content",
    "response",
)


def test_no_counterpart_identity_or_content_columns(seq_out: Path) -> None:
    for name in ("receiving_accounts", "leaking_accounts", "affected_requests"):
        header = list(_read_csv(seq_out / f"{name}.csv")[0])
        assert not [c for c in header for f in FORBIDDEN if f in c], header
    # acct-6 (receiving, F <- D of acct-4): no value in its rows names acct-4 or its request D
    rows = [r for r in _read_csv(seq_out / "affected_requests.csv") if r["account_id"] == "acct-6"]
    assert all("acct-4" not in v and v != "D" and "Four" not in v for r in rows for v in r.values())


def _extra_exposures(tables: dict) -> dict:
    """B (acct-2) also reads C's data (acct-3); H reads A's (both acct-1: same account); replay
    confirms B. Hand-worked: B has 2 counterpart accounts; the same-account pair adds none."""
    add_rows(
        tables,
        "exposures",
        [
            _exposure(
                "B",
                "acct-2",
                "C",
                "acct-3",
                8,
                1,
                (0, 0),
                "2026-08-27T10:00:02.0003Z",
                "2026-08-27T10:00:02.0001Z",
                "stale",
            ),
            _exposure(
                "H",
                "acct-1",
                "A",
                "acct-1",
                0,
                2,
                (0, 1),
                "2026-08-27T10:00:07.0004Z",
                "2026-08-27T10:00:00.0001Z",
                "stale",
            ),
        ],
    )
    for row in tables["affected_requests"]:
        if row["request_id"] == "B" and row["side"] == "receiving":
            row["tokens"], row["counterpart_requests"] = 7, 2
    add_rows(
        tables,
        "affected_requests",
        [
            {
                "side": "leaking",
                "request_id": "C",
                "account_id": "acct-3",
                "confidence": "ledger",
                "tokens": 1,
                "counterpart_requests": 1,
                "first_affected_at": t("2026-08-27T10:00:02.0003Z"),
                "last_affected_at": t("2026-08-27T10:00:02.0003Z"),
            }
        ],
    )
    add_rows(
        tables,
        "replay_results",
        [{"request_id": "B", "verdict": "confirmed", "reason": "contaminated replay matches"}],
    )
    return tables


def test_counterparts_counted_cross_account_only_and_replay_confirms(tmp_path: Path) -> None:
    tables = _extra_exposures(seq_tables())
    db = build_case(tmp_path / "case.duckdb", tables, schemas=every_schema())
    con = open_case(db)
    write_all(con, tmp_path / "out", aware_at=None)
    con.close()
    rows = {
        (r["side"], r["request_id"]): r
        for r in _read_csv(tmp_path / "out" / "notifications" / "affected_requests.csv")
    }
    assert rows[("receiving", "B")]["counterpart_accounts"] == "2"
    assert rows[("receiving", "B")]["counterpart_requests"] == "2"
    assert rows[("receiving", "H")]["counterpart_accounts"] == "1"  # A is the same account
    assert rows[("leaking", "A")]["counterpart_accounts"] == "1"
    assert rows[("receiving", "B")]["confidence"] == "confirmed"
    assert rows[("leaking", "A")]["confidence"] == "confirmed"  # its data was in B's KV
    assert rows[("leaking", "C")]["confidence"] == "confirmed"
    assert rows[("receiving", "H")]["confidence"] == "ledger"
    accounts = {
        r["account_id"]: r["confidence"]
        for r in _read_csv(tmp_path / "out" / "notifications" / "receiving_accounts.csv")
    }
    assert accounts == {
        "acct-1": "ledger",
        "acct-2": "confirmed",
        "acct-4": "ledger",
        "acct-6": "ledger",
    }


def test_replay_bits_per_request_and_account(tmp_path: Path) -> None:
    """replay_bits: a receiving request's own best evidence over runs with the logged model, a
    leaking request's the best of the receivers that read its KV (cross-account), an account's
    the best of its requests; empty where no replay weighed evidence."""
    tables = _extra_exposures(seq_tables())
    tables["replay_results"] = [
        {"request_id": "B", "verdict": "confirmed", "reason": "r", "evidence_bits": 23.456},
        {"request_id": "B", "verdict": "confirmed", "reason": "r", "evidence_bits": 40.0,
         "model_matches": False},  # another model's run: not counted
        {"request_id": "H", "verdict": "not-reproduced", "reason": "r", "evidence_bits": 3.2},
        {"request_id": "F", "verdict": "cannot-replay", "reason": "r"},
    ]  # fmt: skip
    db = build_case(tmp_path / "case.duckdb", tables, schemas=every_schema())
    con = open_case(db)
    write_all(con, tmp_path / "out", aware_at=None)
    con.close()
    notes = tmp_path / "out" / "notifications"
    rows = {
        (r["side"], r["request_id"]): r["replay_bits"]
        for r in _read_csv(notes / "affected_requests.csv")
    }
    assert rows == {
        ("receiving", "B"): "23.46",
        ("receiving", "D"): "",
        ("receiving", "F"): "",
        ("receiving", "H"): "3.2",
        ("leaking", "A"): "23.46",  # read by B (its read by H is the same account's)
        ("leaking", "B"): "3.2",
        ("leaking", "C"): "23.46",
        ("leaking", "D"): "",
        ("leaking", "G"): "",
    }
    best = {
        (r["side"], r["account_id"]): r["replay_bits"]
        for name in ("receiving_accounts", "leaking_accounts")
        for r in _read_csv(notes / f"{name}.csv")
    }
    assert best == {
        ("receiving", "acct-1"): "3.2",
        ("receiving", "acct-2"): "23.46",
        ("receiving", "acct-4"): "",
        ("receiving", "acct-6"): "",
        ("leaking", "acct-1"): "23.46",
        ("leaking", "acct-2"): "3.2",
        ("leaking", "acct-4"): "",
        ("leaking", "acct-7"): "",
    }
    schema = pq.read_schema(notes / "affected_requests.parquet")
    assert str(schema.field("replay_bits").type) == "double"


def test_outputs_are_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The report's header carries its generation time; SOURCE_DATE_EPOCH fixes it.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1787900000")
    first = _run(tmp_path / "a", seq_tables())
    second = _run(tmp_path / "b", seq_tables())
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files
    for rel in files:
        assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel
    for name in ("report.html", "timeline.csv"):
        assert (first.parent / name).read_bytes() == (second.parent / name).read_bytes(), name


def test_missing_analysis_tables_give_empty_lists(tmp_path: Path) -> None:
    tables = {k: v for k, v in seq_tables().items() if k in ("requests", "nodes", "accounts")}
    db = build_case(tmp_path / "case.duckdb", tables, schemas=("schema/case",))
    con = open_case(db)
    result = write_all(con, tmp_path / "out")
    con.close()
    assert "exposures" in result.missing_tables and "affected_accounts" in result.missing_tables
    rows = _read_csv(tmp_path / "out" / "notifications" / "receiving_accounts.csv")
    assert rows == []
    header = (tmp_path / "out" / "notifications" / "receiving_accounts.csv").read_text()
    assert header.startswith("side,account_id,name,contact_email,jurisdiction,confidence")
    report = (tmp_path / "out" / "report.html").read_text()
    assert "The analysis stage has not run on this case" in report
    con = open_case(db)  # nothing was added to the case database
    from forensics.casedb.sql import tables

    assert "exposures" not in tables(con)
    con.close()


def test_csv_cells_cannot_run_as_spreadsheet_formulas(tmp_path: Path) -> None:
    tables = seq_tables()
    for row in tables["accounts"] + tables["affected_accounts"]:
        if row["account_id"] == "acct-2":
            row["name"] = '=HYPERLINK("http://evil.example","Customer Two")'
    out = _run(tmp_path, tables)
    rows = {r["account_id"]: r for r in _read_csv(out / "receiving_accounts.csv")}
    assert rows["acct-2"]["name"] == '\'=HYPERLINK("http://evil.example","Customer Two")'
    records = json.loads((out / "receiving_accounts.json").read_text())
    as_json = {r["account_id"]: r for r in records}
    assert as_json["acct-2"]["name"].startswith("=HYPERLINK")  # JSON keeps the value


def test_report_shows_the_notification_plan(seq_out: Path) -> None:
    html = (seq_out.parent / "report.html").read_text()
    section = html[html.index('id="notifications"') : html.index('id="timeline"')]
    rows = re.findall(
        r"<tr><td>([^<]+)</td><td>([^<]+)</td><td class=\"n\">(\d+)</td>"
        r"<td class=\"n\">(\d+)</td><td>([^<]+)</td>",
        section,
    )
    # hand-worked from accounts.csv and expected_accounts.csv, earliest deadline first per side
    assert rows == [
        ("received others' data", "EU", "1", "1", "2026-08-29T07:00:00.000000Z"),
        ("received others' data", "UK", "1", "1", "2026-08-29T07:00:00.000000Z"),
        ("received others' data", "default", "1", "1", "2026-08-31T07:00:00.000000Z"),
        ("received others' data", "US-CA", "1", "1", "2026-09-27T07:00:00.000000Z"),
        ("data was exposed", "EU", "2", "2", "2026-08-29T07:00:00.000000Z"),
        ("data was exposed", "UK", "1", "1", "2026-08-29T07:00:00.000000Z"),
        ("data was exposed", "US-CA", "1", "1", "2026-09-27T07:00:00.000000Z"),
    ]
