"""Request-log times that cannot be right are loaded and flagged, each with its file, row,
column, value and a reason that says what to check: a first token sent before the request
arrived, a completion before the first token or the arrival, and a time before 2000 (an epoch
written in seconds or milliseconds, which ingest reads as microseconds)."""

from __future__ import annotations

import json

from support.cases import query

ROWS = [  # request_id, received_at, first_token_at, completed_at
    ("ok", "2026-08-27T10:00:00Z", "2026-08-27T10:00:01Z", "2026-08-27T10:00:02Z"),
    ("first-before-arrival", "2026-08-27T10:00:00Z", "2026-08-27T09:00:00Z", None),
    ("done-before-first", "2026-08-27T10:00:00Z", "2026-08-27T10:00:05Z", "2026-08-27T10:00:04Z"),
    ("done-before-arrival", "2026-08-27T10:00:00Z", None, "2026-08-27T09:59:59Z"),
    ("epoch-seconds", "1788000000", None, None),
    ("epoch-millis", "1788000000000", None, None),
    ("same-instant", "2026-08-27T10:00:00Z", "2026-08-27T10:00:00Z", "2026-08-27T10:00:00Z"),
]


def _case(case):
    lines = []
    for rid, received, first, done in ROWS:
        row = {
            "request_id": rid,
            "account_id": "a",
            "model": "m",
            "received_at": received,
            "http_status": 200,
            "prompt_tokens": 1,
        }
        row |= {"first_token_at": first} if first else {}
        row |= {"completed_at": done} if done else {}
        lines.append(json.dumps(row) + "\n")
    return case({"requests.jsonl": "".join(lines)})


def test_impossible_request_times_are_kept_and_warned_of(case, cli, tmp_path) -> None:
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", _case(case), "--db", db, "--json")
    assert code in (0, 1), err
    assert json.loads(out)["rows_loaded"] == len(ROWS)  # kept, not quarantined
    warned = query(
        db,
        'SELECT "row", "column", "value", reason FROM ingest_warnings '
        "WHERE table_name = 'requests' AND file = 'requests.jsonl' ORDER BY 1, 2",
    )
    by_row = {(r, c): (v, why) for r, c, v, why in warned}
    assert set(by_row) == {
        (2, "first_token_at"),
        (3, "completed_at"),
        (4, "completed_at"),
        (5, "received_at"),
        (6, "received_at"),
    }
    assert by_row[(2, "first_token_at")][0] == "2026-08-27T09:00:00.000000Z"
    assert "before the request was received" in by_row[(2, "first_token_at")][1]
    assert "before the first token" in by_row[(3, "completed_at")][1]
    assert "before the request was received" in by_row[(4, "completed_at")][1]
    assert by_row[(5, "received_at")][0] == "1970-01-01T00:29:48.000000Z"  # 1788000000 µs
    for row in (5, 6):
        assert "seconds or milliseconds" in by_row[(row, "received_at")][1]


def test_the_warning_count_is_printed(case, cli, tmp_path) -> None:
    code, _, err = cli("ingest", _case(case), "--db", tmp_path / "c.duckdb")
    assert code in (0, 1)
    assert "5 warnings" in " ".join(err.split())
