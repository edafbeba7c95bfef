"""Case databases for the report and notification tests.

`seq_tables()` is the worked example tests/data/examples/semantics-seq as table rows: the inputs are
read from the example's CSV files, and the analysis tables (exposures, violations,
affected_requests, affected_accounts) are the answers worked out by hand from its ledger (see the
example's README and expected_*.csv), written out here row by row."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from forensics.casedb.sql import sql
from forensics.casedb.standins import SCHEMAS
from support.paths import EXAMPLES

# The worked example (inputs and hand-worked answers), kept as a test fixture.
EXAMPLE = EXAMPLES / "semantics-seq"

Rows = dict[str, list[dict[str, Any]]]

# The instant the provider became aware of the incident, as the export tests give it.
AWARE = datetime(2026, 8, 28, 7, 0, tzinfo=UTC)  # 2026-08-28T09:00:00+02:00


def t(text: str) -> datetime:
    """An ISO time as a naive UTC datetime (how the case database stores times)."""
    return datetime.fromisoformat(text).astimezone(UTC).replace(tzinfo=None)


def _csv(name: str) -> list[dict[str, Any]]:
    with (EXAMPLE / name).open(newline="", encoding="utf-8") as handle:
        out = []
        for i, row in enumerate(csv.DictReader(handle), start=1):
            out.append(
                {
                    **{k: (v if v != "" else None) for k, v in row.items()},
                    "src_file": name,
                    "src_row": i,
                }
            )
        return out


def _exposure(
    r: str,
    ra: str,
    w: str,
    wa: str,
    start: int,
    count: int,
    pos: tuple[int, int],
    read: str,
    write: str,
    kind: str,
) -> dict[str, Any]:
    return {
        "receiver_request_id": r,
        "receiver_account_id": ra,
        "leaker_request_id": w,
        "leaker_account_id": wa,
        "node": "n1",
        "slot_start": start,
        "slot_count": count,
        "leaker_pos_min": pos[0],
        "leaker_pos_max": pos[1],
        "leaker_part": "prompt",
        "first_read_at": t(read),
        "last_read_at": t(read),
        "first_write_at": t(write),
        "last_write_at": t(write),
        "kind": kind,
        "cross_account": ra != wa,
        "confidence": "ledger",
    }


def _affected(side: str, req: str, acct: str, tokens: int, at: str) -> dict[str, Any]:
    return {
        "side": side,
        "request_id": req,
        "account_id": acct,
        "confidence": "ledger",
        "tokens": tokens,
        "counterpart_requests": 1,
        "first_affected_at": t(at),
        "last_affected_at": t(at),
    }


# Read times of the four exposures (seq 7, 19, 21, 26 in the ledger).
READ_B, READ_F = "2026-08-27T10:00:01.0002Z", "2026-08-27T10:00:05.0001Z"
READ_D, READ_H = "2026-08-27T10:00:06.0001Z", "2026-08-27T10:00:07.0004Z"


def seq_tables() -> Rows:
    exposures = [
        _exposure(
            "B", "acct-2", "A", "acct-1", 2, 6, (2, 7), READ_B, "2026-08-27T10:00:00.0001Z", "stale"
        ),
        _exposure(
            "F",
            "acct-6",
            "D",
            "acct-4",
            16,
            4,
            (0, 3),
            READ_F,
            "2026-08-27T10:00:03.0001Z",
            "prefix-mismatch",
        ),
        _exposure(
            "D",
            "acct-4",
            "G",
            "acct-7",
            20,
            2,
            (0, 1),
            READ_D,
            "2026-08-27T10:00:06Z",
            "overwritten",
        ),
        _exposure(
            "H",
            "acct-1",
            "B",
            "acct-2",
            4,
            2,
            (4, 5),
            READ_H,
            "2026-08-27T10:00:07.0003Z",
            "overwritten",
        ),
    ]
    violations = [
        {
            "request_id": "G",
            "node": "n1",
            "slot_start": 20,
            "slot_count": 2,
            "violation": "write-unheld",
            "other_request_id": "D",
            "first_at": t("2026-08-27T10:00:06Z"),
            "last_at": t("2026-08-27T10:00:06Z"),
        },
        {
            "request_id": "B",
            "node": "n1",
            "slot_start": 4,
            "slot_count": 2,
            "violation": "write-after-free",
            "other_request_id": "H",
            "first_at": t("2026-08-27T10:00:07.0003Z"),
            "last_at": t("2026-08-27T10:00:07.0003Z"),
        },
    ]
    affected_requests = [
        _affected("receiving", "B", "acct-2", 6, READ_B),
        _affected("receiving", "F", "acct-6", 4, READ_F),
        _affected("receiving", "D", "acct-4", 2, READ_D),
        _affected("receiving", "H", "acct-1", 2, READ_H),
        _affected("leaking", "A", "acct-1", 6, READ_B),
        _affected("leaking", "D", "acct-4", 4, READ_F),
        _affected("leaking", "G", "acct-7", 2, READ_D),
        _affected("leaking", "B", "acct-2", 2, READ_H),
    ]
    directory = {a["account_id"]: a for a in _csv("accounts.csv")}
    affected_accounts = [
        {
            "side": r["side"],
            "account_id": r["account_id"],
            "name": directory[r["account_id"]]["name"],
            "contact_email": directory[r["account_id"]]["contact_email"],
            "jurisdiction": directory[r["account_id"]]["jurisdiction"],
            "confidence": "ledger",
            "requests": 1,
            "tokens": r["tokens"],
            "first_affected_at": r["first_affected_at"],
            "last_affected_at": r["last_affected_at"],
            "counterpart_accounts": 1,
        }
        for r in affected_requests
    ]
    return {
        "requests": [_request(r) for r in _csv("requests.csv")],
        "nodes": [_node(n) for n in _csv("nodes.csv")],
        "accounts": _csv("accounts.csv"),
        "exposures": exposures,
        "violations": violations,
        "affected_requests": affected_requests,
        "affected_accounts": affected_accounts,
    }


def _request(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key in ("received_at", "first_token_at", "completed_at"):
        out[key] = t(row[key]) if row[key] else None
    for key in ("http_status", "prompt_tokens", "completion_tokens"):
        out[key] = int(row[key]) if row[key] is not None else None
    return out


def _node(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    out["started_at"] = t(row["started_at"])
    for key in ("page_size", "pool_slots", "context_len"):
        out[key] = int(row[key])
    return out


def every_schema() -> tuple[str, ...]:
    """Every DDL file the report reads (later stages included)."""
    return SCHEMAS


def build_case(
    db: Path,
    tables: Rows,
    schemas: tuple[str, ...] = (
        "schema/case",
        "schema/logs",
        "schema/analysis",
        "schema/reconstruct",
    ),
) -> Path:
    """A case database at `db`: the DDL of `schemas` executed, then `tables` inserted."""
    db.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(db))
    con.execute("SET TimeZone = 'UTC'")  # the naive datetimes below are UTC
    for schema in schemas:
        con.execute(sql(schema))
    for table, records in tables.items():
        for record in records:
            names = list(record)
            marks = ", ".join("?" for _ in names)
            cols = ", ".join(f'"{n}"' for n in names)
            con.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", list(record.values()))
    con.close()
    return db


HOSTILE = {
    "B": "<script>alert(1)</script>",
    "H": '"><img src=x onerror=alert(1)>',
    "n1": "<img src=x onerror=alert(2)>",
    "acct-6": "<svg onload=alert(3)>",
}
_ID_COLUMNS = {
    "request_id",
    "receiver_request_id",
    "leaker_request_id",
    "other_request_id",
    "node",
    "decode_node",
    "prefill_node",
    "account_id",
    "receiver_account_id",
    "leaker_account_id",
}


def hostile_tables() -> Rows:
    """The semantics-seq case with request ids, a node name, an account id and every account
    name replaced by markup."""
    tables = seq_tables()
    for records in tables.values():
        for record in records:
            for key in _ID_COLUMNS & record.keys():
                record[key] = HOSTILE.get(record[key], record[key])
            if "name" in record:
                record["name"] += ' "><img src=x onerror=alert(4)><script>x</script>'
    return tables


def add_rows(tables: Rows, table: str, records: list[dict[str, Any]]) -> Rows:
    tables.setdefault(table, []).extend(records)
    return tables
