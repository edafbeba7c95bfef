"""timeline.csv in Timesketch's CSV import format."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path

from support.report_case import add_rows, build_case, every_schema, seq_tables

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
    events = [(r["event_type"], r["request_id"]) for r in rows]
    # hand-worked from the example's requests.csv (gateway times of A, B, D, F, G, H: the
    # requests on the lists), its four exposure runs (each read, and the leaker's first write
    # of the data read: A 00.0001, D 03.0001, G 06, B 07.0003) and two violations, in time
    # order, ties by event type
    assert events == [
        ("engine-start", ""),
        ("request-received", "A"),  # 09:59:59
        ("leaker-write", "A"),  # 10:00:00.0001, read by B
        ("first-token", "A"),
        ("request-completed", "A"),
        ("request-received", "B"),  # 10:00:00.9
        ("exposure", "B"),  # 10:00:01.0002
        ("first-token", "B"),
        ("request-received", "D"),  # 10:00:02.9
        ("leaker-write", "D"),  # 10:00:03.0001, read by F
        ("first-token", "D"),
        ("request-received", "F"),  # 10:00:04.9
        ("exposure", "F"),  # 10:00:05.0001
        ("first-token", "F"),
        ("request-completed", "F"),
        ("request-received", "G"),  # 10:00:05.9; G sent no first token
        ("leaker-write", "G"),  # 10:00:06, read by D
        ("request-completed", "G"),
        ("violation", "G"),
        ("exposure", "D"),  # 10:00:06.0001
        ("request-received", "H"),  # 10:00:06.9
        ("request-completed", "B"),  # 10:00:07
        ("leaker-write", "B"),  # 10:00:07.0003, read by H
        ("violation", "B"),
        ("exposure", "H"),  # 10:00:07.0004
        ("first-token", "H"),
        ("request-completed", "D"),  # 10:00:08
        ("request-completed", "H"),
    ]
    write = next(r for r in rows if r["event_type"] == "leaker-write")
    assert (write["other_request_id"], write["slot_start"], write["slot_count"]) == ("B", "2", "6")
    assert write["datetime"] == "2026-08-27T10:00:00.000100Z"
    assert write["timestamp_desc"] == "KV written by the leaker"
    arrival = next(r for r in rows if r["event_type"] == "request-received")
    assert (
        arrival["datetime"] == "2026-08-27T09:59:59.000000Z" and arrival["account_id"] == "acct-1"
    )
    first = next(r for r in rows if r["event_type"] == "exposure")
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
    exposure = next(e for e in lines if e["event_type"] == "exposure")
    assert lines[0]["slot_start"] is None and isinstance(exposure["slot_start"], int)


def test_replay_verdict_at_the_response_it_judged(tmp_path: Path) -> None:
    """A replay verdict is placed at the first token of the response it judged (a run's own
    wall-clock time would make the file differ from run to run)."""
    tables = seq_tables()
    add_rows(
        tables,
        "replay_results",
        [
            {
                "request_id": "B",
                "verdict": "confirmed",
                "basis": "evidence",
                "reason": "hand-made",
                "decode_node": "n1",
                "run_id": "run-0001",
            }
        ],
    )
    con = open_case(build_case(tmp_path / "case.duckdb", tables, schemas=every_schema()))
    write_all(con, tmp_path / "out")
    con.close()
    with (tmp_path / "out" / "timeline.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    (replay,) = [r for r in rows if r["event_type"] == "replay"]
    assert replay["datetime"] == "2026-08-27T10:00:01.000200Z"  # B's first token
    assert (replay["request_id"], replay["kind"], replay["confidence"]) == (
        "B",
        "confirmed",
        "evidence",
    )
    assert replay["detail"] == "run-0001"
    assert replay["message"] == "replay of B: confirmed (evidence), run-0001"
