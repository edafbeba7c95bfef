"""The headline figures of a case, counted in one place (queries/figures/headline.sql).

The analyze line, the summary investigate prints, the report, notifications/summary.json and
every --json output read these figures; none counts them again. `figures_line` words them the
same way wherever a terminal line shows them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

from forensics.base.isotime import iso_utc
from forensics.casedb.sql import sql
from forensics.casedb.standins import empty_stand_ins
from forensics.db import rows


def headline_figures(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The figures as a dict (times as datetimes), tables of stages that did not run read as
    empty; leaves the TEMP view report_exposure_pairs, which the report's queries also read
    (queries/report/cleanup.sql drops it)."""
    with empty_stand_ins(con):
        con.execute(sql("report/exposure_pairs"))
        return dict(rows(con, "figures/headline")[0])


def as_json(figures: dict[str, Any]) -> dict[str, Any]:
    """The figures with times as ISO-8601 UTC text (None where there is none)."""
    return {k: iso_utc(v) if isinstance(v, datetime) else v for k, v in figures.items()}


def figures_line(f: dict[str, Any]) -> str:
    """The notifiable figures and the same-account ones, as words, for a terminal line."""
    line = (
        f"to notify (cross-account): receiving {f['listed_receiving_requests']} requests / "
        f"{f['listed_receiving_accounts']} accounts, leaking {f['listed_leaking_requests']} "
        f"requests / {f['listed_leaking_accounts']} accounts, {f['cross_tokens']} tokens"
    )
    if f["same_account_runs"]:
        line += (
            f"; same account (not notified): {f['same_account_receiving_requests']} receiving / "
            f"{f['same_account_leaking_requests']} leaking requests, "
            f"{f['same_account_tokens']} tokens"
        )
    return line


# Figures of which any one above zero means a scope held something.
FOUND = (
    "cross_runs",
    "same_account_runs",
    "unknown_account_runs",
    "screened_suspects",
    "listed_receiving_requests",
    "listed_leaking_requests",
)


def held_nothing(figures: dict[str, Any]) -> bool:
    """Whether the figures count nothing at all (within a scope: the scope held nothing, which
    is not an all-clear for the case)."""
    return not any(figures.get(k) for k in FOUND)
