"""Deadline rules: matching, awareness times, override files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from forensics.errors import InputError, UsageError
from forensics.notify.deadlines import deadline, load_rules, match_rule, parse_aware_at

AWARE = datetime(2026, 9, 10, 6, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("jurisdiction", "rule"),
    [
        ("EU", "EU"),
        ("eu", "EU"),
        (" EU-DE ", "EU"),
        ("UK", "UK"),
        ("US-CA", "US-CA"),
        ("US-NY", "*"),
        ("JP", "*"),
        ("", "*"),
        (None, "*"),
    ],
)
def test_matching(jurisdiction: str | None, rule: str) -> None:
    assert match_rule(jurisdiction, load_rules()).jurisdiction == rule


def test_shipped_hours() -> None:
    rules = load_rules()
    # hand-worked: EU/UK customer +24 h and authority +72 h; California +30 days; default +72 h
    eu = deadline("EU", AWARE, rules)
    assert (eu.notify_by, eu.authority_notify_by) == (
        datetime(2026, 9, 11, 6, 30, tzinfo=UTC),
        datetime(2026, 9, 13, 6, 30, tzinfo=UTC),
    )
    assert deadline("US-CA", AWARE, rules).notify_by == datetime(2026, 10, 10, 6, 30, tzinfo=UTC)
    assert deadline("US-CA", AWARE, rules).authority_notify_by is None
    assert deadline("BR", AWARE, rules).notify_by == datetime(2026, 9, 13, 6, 30, tzinfo=UTC)
    assert deadline("EU", None, rules).notify_by is None


def test_aware_at_parsing() -> None:
    assert parse_aware_at("2026-09-10T08:30:00+02:00") == AWARE
    assert parse_aware_at("2026-09-10T06:30Z") == AWARE
    with pytest.raises(UsageError, match="no UTC offset"):
        parse_aware_at("2026-09-10T06:30")
    with pytest.raises(UsageError, match="not an ISO-8601 time"):
        parse_aware_at("last tuesday")


def test_bad_rules_files(tmp_path: Path) -> None:
    missing = tmp_path / "a.csv"
    missing.write_text("jurisdiction,hours\nEU,1\n")
    with pytest.raises(InputError, match="lacks the column"):
        load_rules(missing)
    bad = tmp_path / "b.csv"
    bad.write_text("jurisdiction,notify_within_hours,authority_within_hours,basis\nEU,soon,,x\n")
    with pytest.raises(InputError, match="line 2: notify_within_hours 'soon'"):
        load_rules(bad)
    with pytest.raises(UsageError, match="no such file"):
        load_rules(tmp_path / "none.csv")
