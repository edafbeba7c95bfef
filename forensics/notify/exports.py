"""The notification lists: OUT/notifications/{receiving_accounts,leaking_accounts,
affected_requests}.{csv,json,parquet}.

Cross-account exposures only (the analysis' affected_* tables hold nothing else). A counterpart
is only ever counted (counterpart_accounts, counterpart_requests), never named, and no prompt or
output content is read, so none can reach a file.

The lists are computed once, typed, in a TEMP table (queries/notify/lists.sql, deadlines
included), and each file is written from it by DuckDB's COPY: Parquet keeps UTC timestamps and
int64 counts; JSON and CSV carry ISO-8601 times with a Z; a missing value is null (an empty,
unquoted cell in CSV, where an empty text is a quoted ""); every CSV text cell goes through the
kvf_csv_cell macro (controls and bidirectional formatting characters escaped, formula-looking
text neutralised), and DuckDB quotes every field holding a delimiter or quote."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

import duckdb

from forensics import __version__
from forensics.base.isotime import iso_utc
from forensics.casedb.sql import nested, run_script, sql, template
from forensics.db import rows
from forensics.notify.deadlines import Rule

SIDES = ("receiving", "leaking")
LISTS = {  # list name -> the queries/notify_<kind>_{csv,json,parquet}.sql that write it
    "receiving_accounts": "accounts",
    "leaking_accounts": "accounts",
    "affected_requests": "requests",
}
COPY_OPTIONS = {  # queries/copy_<format>.sql: COPY (query) TO $path with these options
    "csv": "notify/copy_csv",
    "json": "notify/copy_json",
    "jsonl": "notify/copy_jsonl",
    "parquet": "notify/copy_parquet",
}


@dataclass(frozen=True)
class Exports:
    """The lists as rows (times as ISO text), for the notices, the summary and the report."""

    receiving_accounts: list[dict[str, Any]]
    leaking_accounts: list[dict[str, Any]]
    affected_requests: list[dict[str, Any]]

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        return {
            "receiving_accounts": self.receiving_accounts,
            "leaking_accounts": self.leaking_accounts,
            "affected_requests": self.affected_requests,
        }


def prepare_lists(
    con: duckdb.DuckDBPyConnection, aware_at: datetime | None, rules: dict[str, Rule]
) -> None:
    """Create the TEMP table notify_lists from a case database whose missing tables have
    stand-ins."""
    run_script(con, sql("schema/macros"))
    run_script(con, sql("schema/macros_export"))
    con.execute(sql("notify/rules_create"))
    for rule in rules.values():
        con.execute(
            sql("notify/rules_insert"),
            {
                "jurisdiction": rule.jurisdiction,
                "notify_within_hours": rule.notify_within_hours,
                "authority_within_hours": rule.authority_within_hours,
                "basis": rule.basis,
            },
        )
    con.execute(sql("notify/request_rows"))
    con.execute(sql("notify/lists"), {"aware_at": aware_at})


def read_lists(con: duckdb.DuckDBPyConnection) -> Exports:
    """The prepared lists as rows, in file order, with the JSON file's values."""
    found = {name: rows(con, f"notify/{kind}_json", {"list": name}) for name, kind in LISTS.items()}
    return Exports(
        found["receiving_accounts"], found["leaking_accounts"], found["affected_requests"]
    )


def build_exports(
    con: duckdb.DuckDBPyConnection, aware_at: datetime | None, rules: dict[str, Rule]
) -> Exports:
    """Prepare the lists and return them as rows (the TEMP tables stay until cleanup())."""
    prepare_lists(con, aware_at, rules)
    return read_lists(con)


def cleanup(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(sql("notify/cleanup"))


def copy_to(
    con: duckdb.DuckDBPyConnection,
    query: str,
    fmt: str,
    path: Path,
    params: dict[str, Any] | None = None,
) -> Path:
    """Write the rows of queries/<query>.sql to `path` with DuckDB's COPY in `fmt`."""
    statement = template(sql(COPY_OPTIONS[fmt]), query=nested(query))
    con.execute(statement, {**(params or {}), "path": str(path)})
    return path


def write_exports(con: duckdb.DuckDBPyConnection, out_dir: Path) -> list[Path]:
    """Write every prepared list as CSV, JSON and Parquet under out_dir; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, kind in LISTS.items():
        for fmt in ("csv", "json", "parquet"):
            written.append(
                copy_to(con, f"notify/{kind}_{fmt}", fmt, out_dir / f"{name}.{fmt}", {"list": name})
            )
    return written


class ExportFacts(TypedDict):
    """What the export adds to the lists' own facts, in notifications/summary.json, the export
    stage's summary and `report --json`."""

    figures: dict[str, Any]  # the case's headline figures (forensics.figures), as JSON
    scope_filter: dict[str, Any]  # forensics.options.Scope.record(), and matched_nothing
    notice_templates: dict[str, dict[str, str]]  # side -> the template used and its digest


class RuleApplied(TypedDict):
    """One deadline rule the lists used (forensics.notify.deadlines.Rule)."""

    jurisdiction: str
    notify_within_hours: float
    authority_within_hours: float | None
    basis: str


class NotifySummary(ExportFacts):
    """notifications/summary.json, in this order, ExportFacts last."""

    tool_version: str
    aware_at: str | None
    notify_by: str
    rows: dict[str, int]  # list name -> rows
    rules_applied: list[RuleApplied]
    missing_tables: list[str]
    scope: str


def write_summary(
    path: Path,
    exports: Exports,
    aware_at: datetime | None,
    rules: dict[str, Rule],
    missing_tables: list[str],
    facts: ExportFacts,
) -> Path:
    """notifications/summary.json: counts, the awareness time, the rules applied and the stages
    whose tables were missing, so a reader of the lists knows what they rest on; `facts`: the
    case's headline figures (the same the report and the terminal show), the scope, the notice
    templates used."""
    used = sorted({r["notify_rule"] for records in exports.tables().values() for r in records})
    summary: NotifySummary = {
        "tool_version": __version__,
        "aware_at": iso_utc(aware_at) or None,
        "notify_by": (
            "computed from aware_at and the rules"
            if aware_at
            else "empty: no awareness time was given (--aware-at)"
        ),
        "rows": {name: len(records) for name, records in exports.tables().items()},
        "rules_applied": [
            RuleApplied(
                jurisdiction=rules[code].jurisdiction,
                notify_within_hours=rules[code].notify_within_hours,
                authority_within_hours=rules[code].authority_within_hours,
                basis=rules[code].basis,
            )
            for code in used
        ],
        "missing_tables": missing_tables,
        "scope": "cross-account exposures only; counterparts are counted, never named",
        **facts,
    }
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return path


def notify_plan(exports: Exports) -> list[dict[str, Any]]:
    """Per side and rule: accounts, requests and the earliest deadlines (for the report)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for side, records in (
        ("receiving", exports.receiving_accounts),
        ("leaking", exports.leaking_accounts),
    ):
        for record in records:
            groups.setdefault((side, str(record["notify_rule"])), []).append(record)
    return [
        {
            "side": side,
            "rule": rule,
            "accounts": len(records),
            "requests": sum(int(r["requests"] or 0) for r in records),
            "earliest_notify_by": min(str(r["notify_by"] or "") for r in records),
            "earliest_authority_by": min(
                (str(r["authority_notify_by"]) for r in records if r["authority_notify_by"]),
                default="",
            ),
        }
        for (side, rule), records in sorted(
            groups.items(),
            key=lambda kv: (
                kv[0][0] != "receiving",
                min(str(r["notify_by"] or "") for r in kv[1]),
                kv[0][1],
            ),
        )
    ]
