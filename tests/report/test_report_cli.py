"""`kvforensics report` end to end on a case database."""

from __future__ import annotations

import json
import shlex
from html import escape
from pathlib import Path

import pytest
from support.report_case import build_case, seq_tables

try:
    from forensics.cli import run
except ImportError as exc:  # the CLI package needs every command module of the project
    pytest.skip(f"the CLI package does not import here: {exc}", allow_module_level=True)


def test_report_command_writes_everything(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = build_case(tmp_path / "case.duckdb", seq_tables())
    out = tmp_path / "out"
    code = run(
        [
            "report",
            "--db",
            str(db),
            "--out",
            str(out),
            "--aware-at",
            "2026-08-28T09:00:00+02:00",
            "--json",
        ]
    )
    assert code == 1  # ran and found accounts to notify
    summary = json.loads(capsys.readouterr().out)
    assert summary["figures"]["listed_receiving_accounts"] == 4
    assert summary["aware_at"] == "2026-08-28T07:00:00.000000Z"
    for name in (
        "report.html",
        "timeline.csv",
        "notifications/receiving_accounts.parquet",
        "notifications/leaking_accounts.json",
        "notifications/affected_requests.csv",
    ):
        assert (out / name).is_file(), name
    # the report records the command it ran (forensics.cli.run's arguments), not pytest's
    html = (out / "report.html").read_text()
    ran = ["report", "--db", str(db), "--out", str(out), "--aware-at", "2026-08-28T09:00:00+02:00"]
    assert escape(shlex.join(["kvforensics", *ran, "--json"])) in html


def test_report_command_usage_errors(tmp_path: Path) -> None:
    db = build_case(tmp_path / "case.duckdb", seq_tables())
    assert run(["report", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path)]) == 2
    assert run(["report", "--db", str(db), "--out", str(tmp_path), "--aware-at", "noon"]) == 2
