"""Every format and compression loads the same rows; timestamps are normalised to UTC."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from support.cases import parquet_bytes, query

REQUEST_HEADER = "request_id,account_id,model,received_at,http_status,prompt_tokens\n"
EVENTS = [
    {
        "ts": "2026-08-27T10:00:00Z",
        "node": "n1",
        "request_id": "A",
        "op": "alloc",
        "slot_start": 0,
        "slot_count": 4,
        "pos_start": 0,
    },
    {
        "ts": "2026-08-27T19:00:00.000001+09:00",
        "node": "n1",
        "request_id": "A",
        "op": "write",
        "slot_start": 0,
        "slot_count": 4,
        "pos_start": 0,
        "source": "prefill",
    },
    {
        "ts": "1787824800000002",
        "node": "n1",
        "request_id": "A",
        "op": "read",
        "slot_start": 0,
        "slot_count": 4,
        "pos_start": 0,
    },
]
EXPECTED_TS = [
    datetime(2026, 8, 27, 10, 0, 0, 0, tzinfo=UTC),
    datetime(2026, 8, 27, 10, 0, 0, 1, tzinfo=UTC),
    datetime(2026, 8, 27, 10, 0, 0, 2, tzinfo=UTC),
]


def _csv(rows: list[dict[str, object]]) -> str:
    cols = ["ts", "node", "request_id", "op", "slot_start", "slot_count", "pos_start", "source"]
    lines = [",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) for r in rows]
    return "\n".join(lines) + "\n"


def _jsonl(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


RENDER = {"csv": _csv, "jsonl": _jsonl, "parquet": lambda rows: parquet_bytes(rows)}


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("compression", ["", ".gz", ".zst"])
def test_every_format_and_compression_loads(case, cli, tmp_path, fmt, compression):
    root = case(
        {
            "requests.csv": REQUEST_HEADER + "A,acct-1,m,2026-08-27T09:59:59Z,200,4\n",
            f"kv_events.{fmt}{compression}": RENDER[fmt](EVENTS),
        }
    )
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    assert code == 0, err
    rows = query(
        tmp_path / "c.duckdb",
        "SELECT ts, op, slot_count, request_known FROM kv_events ORDER BY input_order",
    )
    assert [r[0] for r in rows] == EXPECTED_TS
    assert [r[1] for r in rows] == ["alloc", "write", "read"]
    assert all(r[3] for r in rows)


def test_typed_parquet_timestamps_and_lists(case, cli, tmp_path):
    events = [dict(e, ts=EXPECTED_TS[i].replace(tzinfo=UTC)) for i, e in enumerate(EVENTS)]
    contents = [{"request_id": "A", "prompt_token_ids": [1, 2, 3], "output_token_ids": [4]}]
    root = case(
        {
            "kv_events/part-0.parquet": parquet_bytes(events),
            "contents.parquet": parquet_bytes(contents),
        }
    )
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    assert code == 0, err
    ts = [r[0] for r in query(tmp_path / "c.duckdb", "SELECT ts FROM kv_events ORDER BY ts")]
    assert ts == EXPECTED_TS
    assert query(tmp_path / "c.duckdb", "SELECT prompt_token_ids FROM contents") == [([1, 2, 3],)]


def test_parts_in_mixed_formats_keep_file_then_row_order(case, cli, tmp_path):
    root = case(
        {
            "kv_events/b.jsonl.gz": _jsonl(EVENTS[2:]),
            "kv_events/a.csv": _csv(EVENTS[:2]),
        }
    )
    code, _, _ = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    assert code == 0
    rows = query(
        tmp_path / "c.duckdb", "SELECT src_file, src_row, op FROM kv_events ORDER BY input_order"
    )
    assert rows == [
        ("kv_events/a.csv", 1, "alloc"),
        ("kv_events/a.csv", 2, "write"),
        ("kv_events/b.jsonl.gz", 1, "read"),
    ]


def test_offset_and_zulu_give_the_same_instant(case, cli, tmp_path):
    root = case(
        {
            "requests.csv": REQUEST_HEADER
            + "A,a,m,2026-08-27T19:00:00+09:00,200,1\n"
            + "B,a,m,2026-08-27T10:00:00Z,200,1\n"
            + "C,a,m,1787824800000000,200,1\n"
        }
    )
    cli("ingest", root, "--db", tmp_path / "c.duckdb")
    got = query(tmp_path / "c.duckdb", "SELECT DISTINCT received_at FROM requests")
    assert got == [(datetime(2026, 8, 27, 10, 0, 0, tzinfo=UTC),)]


def test_worked_examples_load_without_loss(cli, tmp_path):
    from support.paths import EXAMPLES

    for name in ("semantics-seq", "semantics-ties"):
        db = tmp_path / f"{name}.duckdb"
        code, _, err = cli("ingest", EXAMPLES / name, "--db", db, "--json")
        assert code == 0, err
        n = query(db, "SELECT count(*) FROM kv_events")[0][0]
        assert n == {"semantics-seq": 30, "semantics-ties": 12}[name]
