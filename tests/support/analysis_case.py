"""Build small case databases directly (schema/case.sql + rows) for the analysis tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import pyarrow as pa

from forensics.db import connect

EPOCH = dt.datetime(2026, 8, 27, 10, 0, 0, tzinfo=dt.UTC)  # timestamps are UTC instants

KV_COLS = (
    "ts",
    "seq",
    "node",
    "request_id",
    "op",
    "slot_start",
    "slot_count",
    "pos_start",
    "source",
    "content_hash",
    "input_order",
)


def at(us: int | None) -> dt.datetime | None:
    return None if us is None else EPOCH + dt.timedelta(microseconds=us)


def request_row(rid: str, account: str, prompt_tokens: int = 10, **more: Any) -> dict[str, Any]:
    """A request log row with the columns the log requires (received at EPOCH, answered 200)."""
    row = {
        "request_id": rid,
        "account_id": account,
        "model": "m",
        "received_at": at(0),
        "http_status": 200,
        "prompt_tokens": prompt_tokens,
    }
    return row | more


def timed_request(
    rid: str,
    account: str,
    received_s: float,
    prompt: int,
    ttft_s: float | None,
    decode: str = "d1",
    status: int = 200,
    **more: Any,
) -> dict[str, Any]:
    """A request received `received_s` after EPOCH on prefill node p1 and `decode`, its first
    token `ttft_s` later (None: none), completed 2 s after that."""
    received = int(received_s * 1_000_000)
    first = received + int((ttft_s or 0) * 1_000_000)
    return {
        "request_id": rid,
        "account_id": account,
        "model": "m",
        "received_at": at(received),
        "first_token_at": at(first) if ttft_s is not None else None,
        "completed_at": at(first + 2_000_000),
        "http_status": status,
        "prompt_tokens": prompt,
        "prefill_node": "p1",
        "decode_node": decode,
        **more,
    }


def new_case() -> duckdb.DuckDBPyConnection:
    return connect(":memory:")


def insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    """Insert rows (dicts; timestamps as datetime) by column name, with provenance filled in."""
    if not rows:
        return
    cols = sorted({k for r in rows for k in r})
    data = {c: [r.get(c) for r in rows] for c in cols}
    if "src_file" not in data:
        data["src_file"] = [f"{table}.csv"] * len(rows)
    data["src_line" if table in ("engine_evidence", "node_facts") else "src_row"] = list(
        range(1, len(rows) + 1)
    )
    if table == "kv_events":
        data["request_known"] = [True] * len(rows)
    con.register("_rows", pa.table(data))
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _rows")
    finally:
        con.unregister("_rows")


def insert_ledger(con: duckdb.DuckDBPyConnection, events: list[dict[str, Any]]) -> None:
    """Events as the oracle sees them (ts in integer microseconds after EPOCH)."""
    insert(
        con, "kv_events", [{**{c: e.get(c) for c in KV_COLS}, "ts": at(e["ts"])} for e in events]
    )
