"""A case's logs/ folder is read during ingest: node facts and evidence land in the case, each
log is an input of the manifest, and a changed log is noticed on re-ingest."""

from __future__ import annotations

import json
import shutil

from support.cases import query
from support.paths import DATA, EXAMPLES

LOGS = DATA / "logs" / "incident"


def _case(tmp_path):
    root = tmp_path / "case"
    shutil.copytree(EXAMPLES / "semantics-seq", root)
    shutil.copytree(LOGS, root / "logs")
    return root


def test_logs_are_ingested_with_the_case(cli, tmp_path):
    root = _case(tmp_path)
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", root, "--db", db, "--json")
    assert code == 0, err
    files = {f["path"]: f for f in json.loads(out)["files"]}
    log = files["logs/prefill-0.log"]
    assert log["table"] == "logs"
    assert log["rows_read"] == log["rows_loaded"] + log["rows_quarantined"]
    assert log["rows_read"] == len((LOGS / "prefill-0.log").read_text().splitlines())
    pools = query(
        db,
        "SELECT node, pool_slots, context_len FROM nodes "
        "WHERE src_file LIKE 'logs/%' ORDER BY node",
    )
    assert ("prefill-0", 681_280, 1_048_576) in pools
    assert query(db, "SELECT count(*) FROM node_facts")[0][0] > 0
    # the nodes file's own row stays beside the log's
    assert query(db, "SELECT count(*) FROM nodes WHERE src_file = 'nodes.csv'") == [(1,)]


def test_changed_log_is_reloaded(cli, tmp_path):
    root = _case(tmp_path)
    db = tmp_path / "c.duckdb"
    cli("ingest", root, "--db", db)
    before = query(db, "SELECT count(*) FROM node_facts")[0][0]
    code, out, _ = cli("ingest", root, "--db", db, "--json")
    assert json.loads(out)["unchanged"] is True
    assert query(db, "SELECT count(*) FROM node_facts")[0][0] == before
    (root / "logs" / "prefill-0.log").unlink()
    code, out, _ = cli("ingest", root, "--db", db, "--json")
    assert json.loads(out)["unchanged"] is False
    assert query(db, "SELECT count(*) FROM nodes WHERE node = 'prefill-0'") == [(0,)]


def test_relative_case_path_with_logs(cli, tmp_path, monkeypatch):
    _case(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("ingest", "case", "--db", "c.duckdb", "--json")
    assert code == 0, err
    assert any(f["path"] == "logs/prefill-0.log" for f in json.loads(out)["files"])


def test_a_cut_log_line_is_quarantined_with_its_reason(cli, tmp_path):
    """Every log line is loaded or quarantined with its reason: a line cut short (here a
    SGLang capacity line and a vLLM arguments line) and one with NUL bytes each get a row in
    quarantine naming the file, the line and what it began as, and the counts add up."""
    root = _case(tmp_path)
    log = root / "logs" / "prefill-0.log"
    lines = log.read_text().splitlines()
    capacity = next(i for i, line in enumerate(lines) if "KV Cache is allocated" in line)
    lines[capacity] = lines[capacity][: lines[capacity].index("#tokens") + 9]
    lines.append("[2026-03-02 10:00:00] non-default args: {'model': '/m/tiny', 'max_num")
    lines.append("[2026-03-02 10:00:01] Prefill batch. #new-seq: 1\x00, #new-token: 4")
    log.write_text("\n".join(lines) + "\n")
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", root, "--db", db, "--json")
    assert code in (0, 1), err
    got = {f["path"]: f for f in json.loads(out)["files"]}["logs/prefill-0.log"]
    rows = query(
        db,
        'SELECT "row", "value", reason FROM quarantine WHERE file = \'logs/prefill-0.log\' '
        "ORDER BY 1",
    )
    assert got["rows_quarantined"] == len(rows) == 3
    assert got["rows_read"] == got["rows_loaded"] + got["rows_quarantined"] == len(lines)
    assert [r[0] for r in rows] == [capacity + 1, len(lines) - 1, len(lines)]
    assert rows[0][1] == "sglang.kv-allocated", rows[0]
    assert rows[1][1] == "vllm.args" and rows[2][1].startswith("NUL bytes in the line")
    assert all("cut short or damaged" in r[2] and "whole log" in r[2] for r in rows)
