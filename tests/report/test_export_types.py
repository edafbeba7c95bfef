"""Every export file read back with polars and pandas keeps its types: UTC instants, int64
counts and slots, nulls (not empty text) where a value is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
from support.report_case import AWARE, add_rows, build_case, seq_tables, t

from forensics.report.casedb import open_case
from forensics.report.stage import write_all

LISTS = ("receiving_accounts", "leaking_accounts", "affected_requests")
TIMES = ("first_affected_at", "last_affected_at", "notify_by", "authority_notify_by")
COUNTS = ("requests", "tokens", "counterpart_accounts")
FLOATS = ("support", "replay_bits")
UTC_US = pl.Datetime("us", "UTC")


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The worked example, plus a request screened as a possible receiver (no token count)
    whose account has no jurisdiction (so the authority deadline is missing too)."""
    tables = seq_tables()
    add_rows(
        tables,
        "affected_requests",
        [
            {
                "side": "receiving",
                "request_id": "P",
                "account_id": "acct-9",
                "confidence": "possible",
                "tokens": None,
                "counterpart_requests": 3,
                "first_affected_at": t("2026-08-27T10:00:09Z"),
                "last_affected_at": t("2026-08-27T10:00:09Z"),
            }
        ],
    )
    add_rows(
        tables,
        "affected_accounts",
        [
            {
                "side": "receiving",
                "account_id": "acct-9",
                "name": None,
                "contact_email": None,
                "jurisdiction": None,
                "confidence": "possible",
                "requests": 1,
                "tokens": None,
                "first_affected_at": t("2026-08-27T10:00:09Z"),
                "last_affected_at": t("2026-08-27T10:00:09Z"),
                "counterpart_accounts": 0,
            }
        ],
    )
    tmp = tmp_path_factory.mktemp("types")
    con = open_case(build_case(tmp / "case.duckdb", tables))
    write_all(con, tmp / "out", aware_at=AWARE)
    con.close()
    return tmp / "out"


def _nine(df: pl.DataFrame) -> dict:
    return df.filter(pl.col("account_id") == "acct-9").row(0, named=True)


@pytest.mark.parametrize("name", LISTS)
def test_lists_in_polars(out: Path, name: str) -> None:
    notes = out / "notifications"
    frames = {
        "parquet": pl.read_parquet(notes / f"{name}.parquet"),
        "csv": pl.read_csv(notes / f"{name}.csv", try_parse_dates=True),
        "json": pl.read_json(notes / f"{name}.json").with_columns(
            pl.col(c).str.to_datetime(time_unit="us", time_zone="UTC") for c in TIMES
        ),
    }
    # support (the share of explored orders, reconstructed rows only) and replay_bits (the
    # evidence in bits, where a replay ran) are all null here, which CSV and JSON readers cannot
    # type: they are floats in Parquet
    for column in FLOATS:
        assert frames["parquet"].schema[column] == pl.Float64, column
    frames = {
        f: df.with_columns(pl.col(c).cast(pl.Float64) for c in FLOATS) for f, df in frames.items()
    }
    for fmt, df in frames.items():
        for column in TIMES:
            assert df.schema[column] == UTC_US, (fmt, column, df.schema[column])
        for column in COUNTS:
            assert df.schema[column] == pl.Int64, (fmt, column)
        assert df.schema["account_id"] == pl.String
        if name == "receiving_accounts" or name == "affected_requests":
            nine = _nine(df)
            # missing values are nulls, never empty text
            assert nine["tokens"] is None and nine["name"] is None, fmt
            assert nine["authority_notify_by"] is None and nine["jurisdiction"] is None, fmt
        assert df.height == frames["parquet"].height
        assert df.equals(frames["parquet"]), fmt  # the same values in every format


@pytest.mark.parametrize("name", LISTS)
def test_lists_in_pandas(out: Path, name: str) -> None:
    notes = out / "notifications"
    frames = {
        "parquet": pd.read_parquet(notes / f"{name}.parquet", dtype_backend="numpy_nullable"),
        "csv": pd.read_csv(
            notes / f"{name}.csv", parse_dates=list(TIMES), dtype_backend="numpy_nullable"
        ),
        "json": pd.read_json(notes / f"{name}.json", dtype=False, dtype_backend="numpy_nullable"),
    }
    for column in TIMES:  # JSON has no time type: ISO-8601 text with a Z gives UTC instants
        frames["json"][column] = pd.to_datetime(frames["json"][column], format="ISO8601")
    for fmt, df in frames.items():
        for column in TIMES:
            dtype = df[column].dtype
            assert isinstance(dtype, pd.DatetimeTZDtype) and str(dtype.tz) == "UTC", (
                fmt,
                column,
                dtype,
            )
        for column in COUNTS:
            assert str(df[column].dtype) == "Int64", (fmt, column, df[column].dtype)
        if name != "leaking_accounts":
            nine = df[df["account_id"] == "acct-9"].iloc[0]
            assert pd.isna(nine["tokens"]) and pd.isna(nine["name"]), fmt
        first = df["first_affected_at"].min()
        assert first == pd.Timestamp("2026-08-27T10:00:01.0002Z"), fmt


def test_timeline_types(out: Path) -> None:
    csv = pl.read_csv(out / "timeline.csv", try_parse_dates=True)
    lines = pl.read_ndjson(out / "timeline.jsonl")
    for df in (csv, lines):
        assert df.schema["slot_start"] == pl.Int64 and df.schema["slot_count"] == pl.Int64
        assert df.schema["timestamp"] == pl.Int64
    assert csv.schema["datetime"] == UTC_US
    starts = csv.filter(pl.col("event_type") == "engine-start")
    assert starts["slot_start"].is_null().all() and starts["request_id"].is_null().all()
    frame = pd.read_csv(
        out / "timeline.csv", parse_dates=["datetime"], dtype_backend="numpy_nullable"
    )
    assert str(frame["slot_start"].dtype) == "Int64"
    assert isinstance(frame["datetime"].dtype, pd.DatetimeTZDtype)
    # Timesketch's JSON Lines: message, datetime, timestamp_desc on every line
    for line in (out / "timeline.jsonl").read_text().splitlines():
        event = json.loads(line)
        assert event["message"] and event["timestamp_desc"]
        assert event["datetime"].endswith("Z")


def test_csv_cells_are_spreadsheet_safe_and_line_breaks_escaped(tmp_path: Path) -> None:
    """A name that a spreadsheet would run as a formula gets a leading apostrophe in the CSV
    (JSON and Parquet keep it), and a CR or LF inside a value is written as \\r or \\n, so
    that every record is one line."""
    import csv

    tables = seq_tables()
    for row in tables["affected_accounts"]:
        if row["account_id"] == "acct-1":
            row["name"] = '=HYPERLINK("http://x")\r\nsecond line'
        if row["account_id"] == "acct-2":
            row["name"] = "line one\nline two"
    con = open_case(build_case(tmp_path / "case.duckdb", tables))
    write_all(con, tmp_path / "out", aware_at=AWARE)
    con.close()
    notes = tmp_path / "out" / "notifications"
    assert len((notes / "receiving_accounts.csv").read_bytes().splitlines()) == 5
    with (notes / "receiving_accounts.csv").open(newline="", encoding="utf-8") as handle:
        rows = {r["account_id"]: r for r in csv.DictReader(handle)}
    assert len(rows) == 4  # no record split by the line breaks
    assert rows["acct-1"]["name"] == '\'=HYPERLINK("http://x")\\r\\nsecond line'
    assert rows["acct-2"]["name"] == "line one\\nline two"
    kept = {
        r["account_id"]: r["name"]
        for r in json.loads((notes / "receiving_accounts.json").read_text())
    }
    assert kept["acct-1"] == '=HYPERLINK("http://x")\r\nsecond line'
    assert (
        pl.read_parquet(notes / "receiving_accounts.parquet").filter(
            pl.col("account_id") == "acct-1"
        )["name"][0]
        == kept["acct-1"]
    )
