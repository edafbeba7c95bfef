"""The notification lists: OUT/notifications/{receiving_accounts,leaking_accounts,
affected_requests}.{csv,json,parquet}.

Cross-account exposures only (the analysis' affected_* tables hold nothing else). A counterpart
is only ever counted (counterpart_accounts, counterpart_requests), never named, and no prompt or
output content is read, so none can reach a file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from forensics import __version__
from forensics.notify.deadlines import Rule, deadline, iso_utc
from forensics.report.casedb import rows
from forensics.resources import sql
from forensics.textsafe import write_csv_rows

SIDES = ("receiving", "leaking")

# Column name -> arrow type, in file order. The only columns an export may carry.
ACCOUNT_COLUMNS: dict[str, pa.DataType] = {
    "side": pa.string(),
    "account_id": pa.string(),
    "name": pa.string(),
    "contact_email": pa.string(),
    "jurisdiction": pa.string(),
    "confidence": pa.string(),
    "requests": pa.int64(),
    "tokens": pa.int64(),
    "first_affected_at": pa.string(),
    "last_affected_at": pa.string(),
    "counterpart_accounts": pa.int64(),
    "notify_by": pa.string(),
    "authority_notify_by": pa.string(),
    "notify_rule": pa.string(),
    "notify_basis": pa.string(),
}
REQUEST_COLUMNS: dict[str, pa.DataType] = {
    "side": pa.string(),
    "request_id": pa.string(),
    **{k: v for k, v in ACCOUNT_COLUMNS.items() if k != "side"},
    "counterpart_requests": pa.int64(),
}


@dataclass(frozen=True)
class Exports:
    receiving_accounts: list[dict[str, Any]]
    leaking_accounts: list[dict[str, Any]]
    affected_requests: list[dict[str, Any]]

    def tables(self) -> dict[str, tuple[list[dict[str, Any]], dict[str, pa.DataType]]]:
        return {
            "receiving_accounts": (self.receiving_accounts, ACCOUNT_COLUMNS),
            "leaking_accounts": (self.leaking_accounts, ACCOUNT_COLUMNS),
            "affected_requests": (self.affected_requests, REQUEST_COLUMNS),
        }


def _with_deadline(
    row: dict[str, Any], aware_at: datetime | None, rules: dict[str, Rule], columns: dict[str, Any]
) -> dict[str, Any]:
    due = deadline(row.get("jurisdiction"), aware_at, rules)
    out = dict(row)
    out["first_affected_at"] = iso_utc(row.get("first_affected_at"))
    out["last_affected_at"] = iso_utc(row.get("last_affected_at"))
    out["notify_by"] = iso_utc(due.notify_by)
    out["authority_notify_by"] = iso_utc(due.authority_notify_by)
    out["notify_rule"] = due.rule
    out["notify_basis"] = due.basis
    return {name: out.get(name) for name in columns}


def build_exports(
    con: duckdb.DuckDBPyConnection, aware_at: datetime | None, rules: dict[str, Rule]
) -> Exports:
    """The three lists from a case database whose missing tables have stand-ins."""
    con.execute(sql("notify_request_rows"))
    accounts = {
        side: [_with_deadline(r, aware_at, rules, ACCOUNT_COLUMNS)
               for r in rows(con, "notify_accounts", [side])]
        for side in SIDES
    }
    requests = [
        _with_deadline(r, aware_at, rules, REQUEST_COLUMNS)
        for side in SIDES for r in rows(con, "notify_requests", [side])
    ]
    con.execute(sql("notify_cleanup"))
    return Exports(accounts["receiving"], accounts["leaking"], requests)


def write_csv(path: Path, records: list[dict[str, Any]], columns: dict[str, Any]) -> None:
    """Text cells go through forensics.textsafe (formula-looking values get a leading
    apostrophe; CR and LF are quoted). The JSON and Parquet files keep the values as they are."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        write_csv_rows(handle, [list(columns), *([r[c] for c in columns] for r in records)])


def write_json(path: Path, records: list[dict[str, Any]]) -> None:
    text = json.dumps(records, indent=2, ensure_ascii=False, sort_keys=False)
    path.write_text(text + "\n", encoding="utf-8")


def write_parquet(
    path: Path, records: list[dict[str, Any]], columns: dict[str, pa.DataType]
) -> None:
    schema = pa.schema([pa.field(name, kind) for name, kind in columns.items()])
    table = pa.Table.from_pylist(records, schema=schema)
    pq.write_table(table, path, compression="zstd")


def write_exports(exports: Exports, out_dir: Path) -> list[Path]:
    """Write every list as CSV, JSON and Parquet under out_dir; return the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, (records, columns) in exports.tables().items():
        write_csv(out_dir / f"{name}.csv", records, columns)
        write_json(out_dir / f"{name}.json", records)
        write_parquet(out_dir / f"{name}.parquet", records, columns)
        written += [out_dir / f"{name}.{ext}" for ext in ("csv", "json", "parquet")]
    return written


def write_summary(
    path: Path, exports: Exports, aware_at: datetime | None, rules: dict[str, Rule],
    missing_tables: list[str],
) -> Path:
    """notifications/summary.json: counts, the awareness time, the rules applied and the stages
    whose tables were missing, so a reader of the lists knows what they rest on."""
    used = sorted({r["notify_rule"] for _, (records, _) in exports.tables().items()
                   for r in records})
    summary = {
        "tool_version": __version__,
        "aware_at": iso_utc(aware_at) or None,
        "notify_by": ("computed from aware_at and the rules" if aware_at else
                      "empty: no awareness time was given (--aware-at)"),
        "rows": {name: len(records) for name, (records, _) in exports.tables().items()},
        "rules_applied": [
            {"jurisdiction": rules[code].jurisdiction,
             "notify_within_hours": rules[code].notify_within_hours,
             "authority_within_hours": rules[code].authority_within_hours,
             "basis": rules[code].basis} for code in used],
        "missing_tables": missing_tables,
        "scope": "cross-account exposures only; counterparts are counted, never named",
    }
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return path


def notify_plan(exports: Exports) -> list[dict[str, Any]]:
    """Per side and rule: accounts, requests and the earliest deadlines (for the report)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for side, records in (("receiving", exports.receiving_accounts),
                          ("leaking", exports.leaking_accounts)):
        for record in records:
            groups.setdefault((side, str(record["notify_rule"])), []).append(record)
    return [
        {"side": side, "rule": rule, "accounts": len(records),
         "requests": sum(int(r["requests"] or 0) for r in records),
         "earliest_notify_by": min(str(r["notify_by"]) for r in records),
         "earliest_authority_by": min((str(r["authority_notify_by"]) for r in records
                                       if r["authority_notify_by"]), default="")}
        for (side, rule), records in sorted(groups.items(), key=lambda kv: (
            kv[0][0] != "receiving", min(str(r["notify_by"]) for r in kv[1]), kv[0][1]))
    ]
