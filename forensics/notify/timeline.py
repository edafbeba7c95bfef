"""OUT/timeline.csv in Timesketch's CSV import format.

Timesketch needs the columns `message`, `datetime` (ISO 8601) and `timestamp_desc`; `timestamp`
(microseconds since the epoch) is optional; every other column becomes a searchable attribute.
One line per exposure run, ownership violation, screened suspect, engine log finding and engine
start, sorted by time."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from forensics.report.casedb import rows
from forensics.textsafe import write_csv_rows

COLUMNS = (
    "message", "datetime", "timestamp_desc", "timestamp", "event_type", "node", "request_id",
    "account_id", "other_request_id", "other_account_id", "slot_start", "slot_count", "kind",
    "confidence", "detail",
)


def _iso(value: datetime) -> str:
    return value.replace(tzinfo=UTC).isoformat(timespec="microseconds")


def _micros(value: datetime) -> int:
    """Microseconds since the Unix epoch (Timesketch's optional `timestamp` column)."""
    delta = value.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _message(e: dict[str, Any]) -> str:
    where = f"on {e['node']}" if e["node"] else ""
    slots = ""
    if e["slot_start"] is not None:
        slots = f" slots {e['slot_start']}-{e['slot_start'] + e['slot_count'] - 1}"
    kind = e["event_type"]
    if kind == "exposure":
        return (f"{e['request_id']} read KV of {e['other_request_id']} {where}{slots} "
                f"({e['kind']}, {e['detail']})")
    if kind == "violation":
        other = f", held by {e['other_request_id']}" if e["other_request_id"] else ""
        return f"{e['request_id']} {e['kind']} {where}{slots}{other}"
    if kind == "suspect":
        return f"{e['request_id']} screened as a possible receiver {where} ({e['kind']})"
    if kind == "engine-log":
        return f"{e['node']}: {e['kind']}: {e['detail'] or ''}".rstrip(": ")
    return f"{e['node']} started ({e['kind'] or 'role unknown'}, {e['detail']})"


def timeline_rows(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The timeline lines, from a case database whose missing tables have stand-ins."""
    out = []
    for event in rows(con, "timeline_events"):
        line = {k: ("" if v is None else v) for k, v in event.items() if k != "event_at"}
        line["message"] = _message(event)
        line["datetime"] = _iso(event["event_at"])
        line["timestamp"] = _micros(event["event_at"])
        out.append({name: line.get(name, "") for name in COLUMNS})
    return out


def write_timeline(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        # text cells are made spreadsheet-safe and CR/LF fields quoted (forensics.textsafe)
        write_csv_rows(handle, [COLUMNS, *([line.get(c, "") for c in COLUMNS] for line in lines)])
    return path
