"""The simulator's ground truth (ground_truth/*.csv, from its own engine state) and an analysis
table, as sets of rows of text, for comparing the two."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

BUGS = ("oversize-stub", "late-transfer", "double-alloc", "prefix-collision")
CONFIGS = [(b,) for b in BUGS] + [BUGS, ()]

EXPOSURE = (
    "receiver_request_id",
    "leaker_request_id",
    "node",
    "slot_start",
    "slot_count",
    "kind",
    "leaker_pos_min",
    "leaker_pos_max",
    "leaker_part",
    "first_read_at",
    "last_read_at",
    "first_write_at",
    "last_write_at",
    "receiver_account_id",
    "leaker_account_id",
    "cross_account",
)
VIOLATION = ("request_id", "node", "slot_start", "slot_count", "violation", "other_request_id")
ACCOUNT = ("side", "account_id", "requests", "tokens")


def truth(case: Path, name: str, cols: tuple[str, ...]) -> set[tuple]:
    with open(case / "ground_truth" / name, newline="") as f:
        return {tuple(r[c] or None for c in cols) for r in csv.DictReader(f)}


def as_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return str(value)


def got(con: Any, sql_text: str) -> set[tuple]:
    return {tuple(as_text(v) for v in row) for row in con.execute(sql_text).fetchall()}
