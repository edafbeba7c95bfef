"""A token id list is loaded exactly as written or quarantined: an id beyond a 64-bit integer
never becomes a NULL inside a loaded list, and a negative id (no tokenizer has one; replay
would index the embedding with it) is quarantined with the reason.

JSON Lines, CSV (a quoted JSON array) and Parquet (a list column) are each checked; what loads
is read back from the case database and compared with the lists written."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.cases import query

GOOD = [1, 2, 3]
BAD = {
    "beyond BIGINT": [99999999999999999999999, 52],
    "negative": [-5, 1],
}


def _rows() -> list[tuple[str, list[int]]]:
    return [("good", GOOD), *((k, v) for k, v in BAD.items())]


def _jsonl() -> dict[str, str | bytes]:
    lines = [json.dumps({"request_id": r, "prompt_token_ids": ids}) for r, ids in _rows()]
    return {"contents.jsonl": "\n".join(lines) + "\n"}


def _csv() -> dict[str, str | bytes]:
    lines = ["request_id,prompt_token_ids"]
    lines += [f'{r},"{json.dumps(ids)}"' for r, ids in _rows()]
    return {"contents.csv": "\n".join(lines) + "\n"}


def _parquet() -> dict[str, str | bytes]:
    rows = [(r, ids) for r, ids in _rows() if all(abs(i) < 2**63 for i in ids)]
    table = pa.table(
        {"request_id": [r for r, _ in rows], "prompt_token_ids": [ids for _, ids in rows]},
        schema=pa.schema([("request_id", pa.string()), ("prompt_token_ids", pa.list_(pa.int64()))]),
    )
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return {"contents.parquet": buf.getvalue()}


@pytest.mark.parametrize("files", [_jsonl, _csv, _parquet], ids=["jsonl", "csv", "parquet"])
def test_only_whole_lists_of_token_ids_load(case, cli, tmp_path, files) -> None:
    written = files()
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", case(written), "--db", db, "--json")
    assert code == 1, err  # rows were quarantined
    loaded = query(db, "SELECT request_id, prompt_token_ids FROM contents")
    assert loaded == [("good", GOOD)]
    reasons = dict(query(db, "SELECT value, reason FROM quarantine"))
    assert len(reasons) == json.loads(out)["rows_quarantined"]
    assert all(">= 0" in why for why in reasons.values()), reasons


@pytest.mark.parametrize("key", ["request_id", "prompt_token_ids", "not_in_the_contract"])
def test_a_json_line_naming_a_field_twice_is_quarantined(case, cli, tmp_path, key) -> None:
    """JSON readers disagree on which of two values of one name counts (DuckDB the first,
    Python's json the last): such a line is quarantined, never loaded with one of them."""
    twice = f'{{"request_id": "r2", "prompt_token_ids": [4], "{key}": "x", "{key}": "y"}}'
    good = json.dumps({"request_id": "r1", "prompt_token_ids": GOOD})
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", case({"contents.jsonl": f"{good}\n{twice}\n"}), "--db", db)
    assert code == 1, err
    assert query(db, "SELECT request_id FROM contents") == [("r1",)]
    ((row, why),) = query(db, 'SELECT "row", reason FROM quarantine')
    assert row == 2 and f'"{key}" twice' in why
