"""One engine named two ways: the gateway logs node `vllm-0`, the engine's only log is called
`logs/engine.log` (or `vllm.log`, `server.log`). The log is read as vllm-0's, with a warning
that says so and how to say otherwise; where another reading is possible (two logs, two nodes
in the request log, a nodes file naming the log's node, a mapping file, a ledger), nothing is
renamed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cases import query
from support.paths import DATA

LOG = DATA / "logs" / "vllm" / "chat-a.log"  # vLLM 0.33: 2,345,216 tokens of KV cache
HEADER = "request_id,account_id,model,received_at,http_status,prompt_tokens,node\n"


def _case(tmp_path: Path, logs: dict[str, Path], nodes: tuple[str, ...] = ("vllm-0",)) -> Path:
    root = tmp_path / "case"
    (root / "logs").mkdir(parents=True)
    rows = "".join(
        f"R{i},acct-{i},m,2026-08-27T10:00:0{i}Z,200,4,{nodes[i % len(nodes)]}\n" for i in range(4)
    )
    (root / "requests.csv").write_text(HEADER + rows)
    for name, source in logs.items():
        shutil.copy(source, root / "logs" / name)
    return root


def _pools(db: Path) -> list[tuple[str, int]]:
    return query(db, "SELECT node, pool_slots FROM nodes ORDER BY node")


@pytest.mark.parametrize("name", ["engine.log", "vllm.log", "server.log", "chat-a.log"])
def test_the_only_log_is_read_as_the_only_served_nodes(cli, tmp_path, name) -> None:
    root = _case(tmp_path, {name: LOG})
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", root, "--db", db, "--json")
    assert code == 0, err
    assert _pools(db) == [("vllm-0", 2_345_216)]
    assert {r[0] for r in query(db, "SELECT DISTINCT node FROM node_facts")} == {"vllm-0"}
    assert query(db, "SELECT DISTINCT node FROM log_files") == [("vllm-0",)]
    (warning,) = query(db, "SELECT file, value, reason FROM ingest_warnings")
    assert warning[0] == f"logs/{name}" and warning[1] != "vllm-0"
    assert warning[2].startswith("read as the log of node vllm-0") and "node_map.csv" in warning[2]
    assert any("read as the log of node vllm-0" in n for n in json.loads(out)["notes"])


def test_two_nodes_in_the_request_log_leave_the_log_as_named(cli, tmp_path) -> None:
    root = _case(tmp_path, {"engine.log": LOG}, nodes=("vllm-0", "vllm-1"))
    db = tmp_path / "c.duckdb"
    assert cli("ingest", root, "--db", db)[0] == 0
    assert _pools(db) == [("engine", 2_345_216)]
    assert query(db, "SELECT count(*) FROM ingest_warnings") == [(0,)]


def test_two_logs_leave_both_as_named(cli, tmp_path) -> None:
    root = _case(tmp_path, {"engine.log": LOG, "other.log": LOG})
    db = tmp_path / "c.duckdb"
    assert cli("ingest", root, "--db", db)[0] == 0
    assert [n for n, _ in _pools(db)] == ["engine", "other"]


def test_a_mapping_file_or_a_nodes_row_decides(cli, tmp_path) -> None:
    """A mapping that names the log's node, or a nodes file with a row for the served node,
    is the operator's word: nothing is renamed."""
    root = _case(tmp_path, {"engine.log": LOG})
    (root / "logs" / "node_map.csv").write_text("node,file_glob\nvllm-9,engine.log\n")
    db = tmp_path / "c.duckdb"
    assert cli("ingest", root, "--db", db)[0] == 0
    assert [n for n, _ in _pools(db)] == ["vllm-9"]
    (root / "logs" / "node_map.csv").unlink()
    (root / "nodes.csv").write_text("node,role,page_size,pool_slots\nvllm-0,unified,16,4096\n")
    assert cli("ingest", root, "--db", db)[0] == 0
    assert _pools(db) == [("engine", 2_345_216), ("vllm-0", 4096)]
