"""timeline.csv in Timesketch's CSV import format."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path

from report_case import add_rows, build_case, every_schema, seq_tables

from forensics.report.casedb import open_case
from forensics.report.stage import write_all


def test_timeline_lines(tmp_path: Path) -> None:
    con = open_case(build_case(tmp_path / "case.duckdb", seq_tables()))
    write_all(con, tmp_path / "out")
    con.close()
    with (tmp_path / "out" / "timeline.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:3] == ["message", "datetime", "timestamp_desc"]
    times = [datetime.fromisoformat(r["datetime"]) for r in rows]
    assert all(t.tzinfo is not None and t.utcoffset().total_seconds() == 0 for t in times)
    assert times == sorted(times)
    kinds = [r["event_type"] for r in rows]
    # hand-worked: 1 engine start, 4 exposure runs, 2 violations, in time order
    assert kinds == [
        "engine-start",
        "exposure",
        "exposure",
        "violation",
        "exposure",
        "violation",
        "exposure",
    ]
    first = rows[1]
    assert (
        first["request_id"],
        first["other_request_id"],
        first["slot_start"],
        first["slot_count"],
        first["kind"],
    ) == ("B", "A", "2", "6", "stale")
    assert first["datetime"] == "2026-08-27T10:00:01.000200Z"
    assert first["message"] == "B read KV of A on n1 slots 2-7 (stale, cross-account)"
    assert first["timestamp"] == "1787824801000200"  # date -d 2026-08-27T10:00:01Z +%s, + µs
    assert all(r["message"] and r["timestamp_desc"] for r in rows)


def test_engine_start_once_and_jsonl_agrees(tmp_path: Path) -> None:
    """A start given by the nodes file and logged by the engine is one event; timeline.jsonl
    holds the same events as timeline.csv."""
    tables = seq_tables()
    start = dict(tables["nodes"][0])
    # the log says another pool size than the nodes file: still one start, the engine's values
    add_rows(
        tables, "node_starts", [{**start, "pool_slots": 7, "src_file": "logs/n1.log", "src_row": 3}]
    )
    con = open_case(build_case(tmp_path / "case.duckdb", tables, schemas=every_schema()))
    write_all(con, tmp_path / "out")
    con.close()
    with (tmp_path / "out" / "timeline.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    starts = [r for r in rows if r["event_type"] == "engine-start"]
    assert len(starts) == 1 and "pool_slots=7 " in starts[0]["detail"] + " "
    lines = [
        json.loads(line) for line in (tmp_path / "out" / "timeline.jsonl").read_text().splitlines()
    ]
    assert [(e["message"], e["datetime"]) for e in lines] == [
        (r["message"], r["datetime"]) for r in rows
    ]
    assert lines[0]["slot_start"] is None and isinstance(lines[1]["slot_start"], int)
