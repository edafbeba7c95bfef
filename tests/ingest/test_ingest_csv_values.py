"""Valid CSV loads whatever its values hold, and a file that is not what its name says is named
for what it is.

The files are written by Python's csv module (the oracle of what valid CSV is), and what
loads is read back from the case database."""

from __future__ import annotations

import csv
import gzip
import io
import json

import pytest
import zstandard
from support.cases import query, write_file

HEADER = ["request_id", "account_id", "model", "received_at", "http_status", "prompt_tokens"]


def _csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    return buf.getvalue()


def _row(rid: str, model: str = "m") -> list[str]:
    return [rid, "acct-1", model, "2026-08-27T10:00:00Z", "200", "5"]


@pytest.mark.parametrize(
    "value",
    ["R\n1", "R\r\n1", "line one\nline two, with a comma", "a\nb\nc\nd\ne"],
    ids=["lf", "crlf", "comma", "many-lines"],
)
@pytest.mark.parametrize("column", ["request_id", "model"])
def test_a_quoted_newline_in_the_first_or_last_column_is_one_value(
    case, cli, tmp_path, value, column
) -> None:
    """request_id first, or model moved to the last column."""
    header = HEADER if column == "request_id" else [*HEADER[:2], *HEADER[3:], "model"]
    rows = [_row("R0"), _row(value) if column == "request_id" else _row("R1", value), _row("R2")]
    if column == "model":
        rows = [[*r[:2], *r[3:], r[2]] for r in rows]
    text = _csv(header, rows)
    expected = sorted(r[column] for r in csv.DictReader(io.StringIO(text, newline="")))
    root = case({"requests.csv": text})
    code, out, err = cli("ingest", root, "--db", tmp_path / "c.duckdb", "--json")
    assert code == 0, err
    assert json.loads(out)["rows_loaded"] == 3
    got = query(tmp_path / "c.duckdb", f"SELECT {column} FROM requests")
    assert sorted(r[0] for r in got) == expected


def test_a_quote_that_swallows_the_next_row_still_stops(case, cli, tmp_path) -> None:
    text = (
        _csv(HEADER, [_row("R0")])
        + 'R1,acct-1,"m,2026-08-27T10:00:00Z,200,5\nR2,acct-1,m",x,200,5\n'
    )
    root = case({"requests.csv": text})
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    assert code == 2 and "line 3" in " ".join(err.split())


def test_a_stray_quote_joining_more_than_the_csv_modules_field_size_still_stops(
    case, cli, tmp_path
) -> None:
    rows = "".join(f"R{i},acct-1,m,2026-08-27T10:00:00Z,200,5\n" for i in range(3, 6000))
    text = _csv(HEADER, [_row("R0")]) + 'R1,acct-1,"m,x,200,5\n' + rows + 'R9,a,m",x,200,5\n'
    root = case({"requests.csv": text})
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    assert code == 2 and "line 3" in " ".join(err.split()) and "Traceback" not in err


def _parquet_bytes() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"request_id": ["R0"]}), buf)
    return buf.getvalue()


TEXT = _csv(HEADER, [_row("R0"), _row("R1")])
MISNAMED = {  # file name, bytes, what the message must say it holds, a word of the fix
    "gzip named .csv": ("requests.csv", gzip.compress(TEXT.encode(), mtime=0), "gzip", ".gz"),
    "zstd named .csv": (
        "requests.csv",
        zstandard.ZstdCompressor().compress(TEXT.encode()),
        "zstd",
        ".zst",
    ),
    "zstd named .gz": (
        "requests.csv.gz",
        zstandard.ZstdCompressor().compress(TEXT.encode()),
        "zstd",
        ".zst",
    ),
    "gzip named .zst": ("requests.csv.zst", gzip.compress(TEXT.encode(), mtime=0), "gzip", ".gz"),
    "plain text named .gz": ("requests.csv.gz", TEXT.encode(), "not compressed", "requests.csv"),
    "parquet named .csv": ("requests.csv", _parquet_bytes(), "Parquet", ".parquet"),
    "parquet named .jsonl": ("requests.jsonl", _parquet_bytes(), "Parquet", ".parquet"),
    "parquet in a .csv.gz": (
        "requests.csv.gz",
        gzip.compress(_parquet_bytes(), mtime=0),
        "Parquet",
        ".parquet",
    ),
    "UTF-16 with a BOM": ("requests.csv", TEXT.encode("utf-16"), "UTF-16", "UTF-8"),
    "UTF-16 without a BOM": ("requests.csv", TEXT.encode("utf-16-le"), "UTF-16", "UTF-8"),
    "a spreadsheet (zip)": ("requests.csv", b"PK\x03\x04" + bytes(60), "ZIP", "CSV"),
}


@pytest.mark.parametrize(("name", "data", "holds", "fix"), MISNAMED.values(), ids=MISNAMED.keys())
def test_a_file_that_is_not_what_its_name_says_is_named_for_what_it_holds(
    case, cli, tmp_path, name, data, holds, fix
) -> None:
    root = case({})
    write_file(root / name, data)  # as it is: the case fixture would compress a .gz or .zst
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    text = " ".join(err.split())
    assert code == 2, text
    assert name in text and holds in text and fix in text.split("Fix:")[-1], text
    assert "Traceback" not in text


@pytest.mark.parametrize("block", [None, 64], ids=["one block", "small blocks"])
@pytest.mark.parametrize("quotes_elsewhere", [False, True])
def test_a_carriage_return_inside_an_unquoted_value_names_its_line(
    case, cli, tmp_path, monkeypatch, quotes_elsewhere, block
) -> None:
    """Small read blocks: the line is in a later block than the header, read the fast way."""
    if block:
        from forensics.ingest import integrity

        monkeypatch.setattr(integrity, "CHUNK", block)
    rows = _csv(HEADER, [_row("R0"), _row("R1"), _row("R2")]).splitlines(keepends=True)
    rows[2] = rows[2].replace("acct-1", "acct\r-1")  # line 3: a bare carriage return
    if quotes_elsewhere:  # a quoted value elsewhere in the file takes the line-by-line path
        rows[3] = rows[3].replace(",m,", ',"m",')
    root = case({"requests.csv": "".join(rows)})
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    text = " ".join(err.split())
    assert code == 2 and "requests.csv" in text and "line 3" in text, text
    assert "carriage return" in text and "Traceback" not in text
