"""Notification deadlines per jurisdiction.

The rules table (forensics/notify/rules.csv, shipped with the package) has one row per
jurisdiction code:

- `jurisdiction`: the code in the accounts table (`EU`, `UK`, `US-CA`, ...), or `*` for the default;
- `notify_within_hours`: hours after the awareness time by which the customer must be told
  (becomes `notify_by`);
- `authority_within_hours`: hours by which a supervisory authority must be told, where a law sets
  one (becomes `authority_notify_by`; empty when none);
- `basis`: the legal basis in words, copied into the exports.

A file given with `--rules FILE` has the same columns; its rows replace the shipped rows of the
same jurisdiction and add new ones. An account's jurisdiction is matched exactly (ignoring case),
then by its part before the first `-` (`EU-DE` uses `EU`), then by `*`.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from forensics.base.isotime import option_time
from forensics.errors import InputError, UsageError

RULES_FILE = Path(__file__).resolve().parent / "rules.csv"
MAX_HOURS = 1_000_000.0  # about 114 years
_COLUMNS = ("jurisdiction", "notify_within_hours", "authority_within_hours", "basis")


@dataclass(frozen=True)
class Rule:
    jurisdiction: str
    notify_within_hours: float
    authority_within_hours: float | None
    basis: str


@dataclass(frozen=True)
class Deadline:
    notify_by: datetime | None
    authority_notify_by: datetime | None
    rule: str
    basis: str


def _hours(text: str, path: Path, line: int, column: str) -> float | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError as exc:
        raise InputError(
            f"line {line}: {column} '{text}' is not a number of hours",
            path=str(path),
            fix="write hours as a number, e.g. 72",
        ) from exc
    if not math.isfinite(value) or value < 0 or value > MAX_HOURS:
        raise InputError(
            f"line {line}: {column} '{text}' is not between 0 and {MAX_HOURS:.0f} hours",
            path=str(path),
            fix="write hours as a number, e.g. 72",
        )
    return value


def _read_rules(path: Path) -> list[Rule]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(
                f"the rules file lacks the column(s) {', '.join(missing)}",
                path=str(path),
                fix=f"use the header {','.join(_COLUMNS)}",
            )
        return [_rule(row, path, line) for line, row in enumerate(reader, start=2)]


def _rule(row: dict[str, str], path: Path, line: int) -> Rule:
    code = (row["jurisdiction"] or "").strip().upper()
    notify = _hours(row["notify_within_hours"], path, line, "notify_within_hours")
    if not code or notify is None:
        raise InputError(
            f"line {line}: a rule needs a jurisdiction and notify_within_hours", path=str(path)
        )
    authority = _hours(row["authority_within_hours"], path, line, "authority_within_hours")
    return Rule(code, notify, authority, (row["basis"] or "").strip())


def load_rules(override: Path | None = None) -> dict[str, Rule]:
    """The shipped rules, with the rows of `override` (if given) replacing or adding rules."""
    rules = {r.jurisdiction: r for r in _read_rules(RULES_FILE)}
    if override is not None:
        if not override.is_file():
            raise UsageError(f"--rules: no such file {override}")
        rules.update({r.jurisdiction: r for r in _read_rules(override)})
    if "*" not in rules:
        raise InputError("the rules need a default row with jurisdiction '*'", path=str(override))
    return rules


def match_rule(jurisdiction: str | None, rules: dict[str, Rule]) -> Rule:
    """The rule for a jurisdiction code: exact, then its prefix before '-', then the default."""
    code = (jurisdiction or "").strip().upper()
    for candidate in (code, code.split("-", 1)[0]):
        if candidate and candidate in rules:
            return rules[candidate]
    return rules["*"]


def parse_aware_at(text: str) -> datetime:
    """An ISO-8601 time with an offset (or a trailing Z), as an aware UTC datetime."""
    return option_time(text, "--aware-at", "2026-09-10T09:00:00+02:00").astimezone(UTC)


def check_aware_at(text: str, rules: dict[str, Rule]) -> datetime:
    """parse_aware_at, and every deadline it gives must be a date (years 0001-9999)."""
    aware = parse_aware_at(text)
    hours = [
        h
        for r in rules.values()
        for h in (r.notify_within_hours, r.authority_within_hours)
        if h is not None
    ]
    try:
        aware + timedelta(hours=max(hours, default=0))
    except OverflowError as exc:
        raise UsageError(
            f"--aware-at '{text}': the deadlines it gives would fall after the year "
            "9999; check the time"
        ) from exc
    return aware


def deadline(
    jurisdiction: str | None, aware_at: datetime | None, rules: dict[str, Rule]
) -> Deadline:
    """When the account must be told (and the authority, where a rule says so)."""
    rule = match_rule(jurisdiction, rules)
    if aware_at is None:
        return Deadline(None, None, rule.jurisdiction, rule.basis)
    notify = aware_at + timedelta(hours=rule.notify_within_hours)
    authority = None
    if rule.authority_within_hours is not None:
        authority = aware_at + timedelta(hours=rule.authority_within_hours)
    return Deadline(notify, authority, rule.jurisdiction, rule.basis)
