"""A table folder laid out like a hive partition (`kv_events/node=X/…`) is read as plain parts:
the folder name never replaces the value each row holds (DuckDB would otherwise take `node`
from the path, silently)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.cases import query

REQUESTS = (
    "request_id,account_id,model,received_at,http_status,prompt_tokens\n"
    "R1,a,m,2026-08-27T10:00:00Z,200,4\n"
)
ROWS = [
    {
        "ts": "2026-08-27T10:00:00Z",
        "node": "real-node",
        "request_id": "R1",
        "op": "alloc",
        "slot_start": 1,
        "slot_count": 4,
        "pos_start": None,
    },
    {
        "ts": "2026-08-27T10:00:01Z",
        "node": "real-node",
        "request_id": "R1",
        "op": "write",
        "slot_start": 1,
        "slot_count": 4,
        "pos_start": 0,
    },
]


def _write(part: Path, kind: str) -> None:
    part.parent.mkdir(parents=True)
    if kind == "parquet":
        pq.write_table(pa.Table.from_pylist(ROWS), part)
    elif kind == "csv":
        lines = ["ts,node,request_id,op,slot_start,slot_count,pos_start"]
        lines += [",".join("" if v is None else str(v) for v in r.values()) for r in ROWS]
        part.write_text("\n".join(lines) + "\n")
    else:
        import json

        part.write_text("".join(json.dumps(r) + "\n" for r in ROWS))


@pytest.mark.parametrize("kind", ["parquet", "csv", "jsonl"])
def test_hive_folder_name_does_not_replace_the_rows_node(cli, tmp_path, kind):
    case = tmp_path / "case"
    _write(case / "kv_events" / "node=folder-name" / f"part.{kind}", kind)
    (case / "requests.csv").write_text(REQUESTS)
    db = tmp_path / "c.duckdb"
    code, _, err = cli("ingest", case, "--db", db, "--ledger-load")  # loaded, as such folders
    assert code == 0, err  # of Parquet are read in place by default (test_ledger_default.py)
    assert query(db, "SELECT node, count(*) FROM kv_events GROUP BY node") == [("real-node", 2)]
