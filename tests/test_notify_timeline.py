"""timeline.csv in Timesketch's CSV import format."""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

from report_case import build_case, seq_tables

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
    assert kinds == ["engine-start", "exposure", "exposure", "violation", "exposure",
                     "violation", "exposure"]
    first = rows[1]
    assert (first["request_id"], first["other_request_id"], first["slot_start"],
            first["slot_count"], first["kind"]) == ("B", "A", "2", "6", "stale")
    assert first["datetime"] == "2026-08-27T10:00:01.000200+00:00"
    assert first["timestamp"] == "1787824801000200"  # date -d 2026-08-27T10:00:01Z +%s, + µs
    assert all(r["message"] and r["timestamp_desc"] for r in rows)
