"""OUT/timeline.csv and OUT/timeline.jsonl in Timesketch's import formats.

Timesketch needs `message`, `datetime` (ISO 8601) and `timestamp_desc`; `timestamp`
(microseconds since the epoch) is optional; every other column becomes a searchable attribute.
One line per exposure run, leaker write behind one, ownership violation, screened suspect,
arrival, first token and completion of a request on the lists, replay verdict, engine log finding
and engine start (the event_type column says which), sorted by time, no event twice. Both files
are written by DuckDB's COPY from one TEMP table (queries/notify/timeline_events.sql): slots stay
integers and a value that does not apply is NULL (an empty cell, or null)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from forensics.casedb.sql import run_script, sql
from forensics.notify.exports import copy_to


def write_timeline(con: duckdb.DuckDBPyConnection, out_dir: Path) -> list[Path]:
    """Write OUT/timeline.csv and OUT/timeline.jsonl from a case database whose missing tables
    have stand-ins; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run_script(con, sql("schema/macros"))
    run_script(con, sql("schema/macros_export"))
    con.execute(sql("notify/timeline_events"))
    try:
        return [
            copy_to(con, "notify/timeline_csv", "csv", out_dir / "timeline.csv"),
            copy_to(con, "notify/timeline_jsonl", "jsonl", out_dir / "timeline.jsonl"),
        ]
    finally:
        con.execute(sql("notify/timeline_cleanup"))
