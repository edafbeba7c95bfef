"""load_logs: node rows, per-value provenance, evidence and file counts in the case database."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from support.paths import DATA

from forensics.casedb.sql import sql
from forensics.errors import InputError
from forensics.logs.load import load_logs

LOGS = DATA / "logs"


@pytest.fixture
def case(tmp_path: Path) -> Path:
    root = tmp_path / "case"
    shutil.copytree(LOGS / "incident", root / "logs")
    return root


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(sql("schema/case"))
    return con


def _files(case: Path) -> list[Path]:
    return sorted((case / "logs").iterdir())


def test_nodes_rows_with_provenance(case, con):
    load_logs(con, case, _files(case))
    rows = con.execute(
        "SELECT node, role, model, engine, page_size, pool_slots, context_len, "
        "started_at, src_file, src_row FROM nodes ORDER BY node"
    ).fetchall()
    assert [r[:7] for r in rows] == [
        ("decode-0", "decode", "acme/longctx-70b", "sglang", 64, 1409024, 1048576),
        ("prefill-0", "prefill", "acme/longctx-70b", "sglang", 64, 681280, 1048576),
    ]
    assert [(str(r[7]), r[8], r[9]) for r in rows] == [
        ("2026-08-27 09:58:05+00:00", "logs/decode-0.log.gz", 4),
        ("2026-08-27 09:58:01+00:00", "logs/prefill-0.log", 10),
    ]


def test_node_facts_point_at_their_lines(case, con):
    load_logs(con, case, _files(case))
    facts = con.execute(
        "SELECT fact, value, src_file, src_line, source FROM node_facts "
        "WHERE node = 'prefill-0' ORDER BY fact"
    ).fetchall()
    assert facts == [
        ("context_len", "1048576", "logs/prefill-0.log", 10, "sglang.pool-warning"),
        ("fits", "false", None, None, "derived: pool_slots >= context_len"),
        ("model", "acme/longctx-70b", "logs/prefill-0.log", 1, "sglang.server-args"),
        ("page_size", "64", "logs/prefill-0.log", 1, "sglang.server-args"),
        ("pool_slots", "681280", "logs/prefill-0.log", 10, "sglang.pool-warning"),
        ("role", "prefill", "logs/prefill-0.log", 1, "sglang.server-args"),
    ]
    # every fact read from a line names a line that says it
    lines = (case / "logs" / "prefill-0.log").read_text().splitlines()
    for fact, value, _, line, _ in facts:
        if line is not None:
            assert value in lines[line - 1], fact


def test_evidence_table(case, con):
    summary = load_logs(con, case, _files(case))
    rows = con.execute(
        "SELECT node, kind, request_id, value, max_value, src_file, src_line "
        "FROM engine_evidence ORDER BY src_file, src_line"
    ).fetchall()
    assert rows == [
        (
            "decode-0",
            "kv-checksum-mismatch",
            "4a5b6c7d8e9f40a1b2c3d4e5f6a7b8c9",
            0x1D02A9F4,
            0x5BC31A7E,
            "logs/decode-0.log.gz",
            8,
        ),
        ("decode-0", "kv-canary-violation", None, 11873, 2004, "logs/decode-0.log.gz", 11),
        (
            "decode-0",
            "deferred-release-timeout",
            "c3d4e5f6a7b8493a9b0c1d2e3f4a5b6c",
            30,
            None,
            "logs/decode-0.log.gz",
            16,
        ),
        (
            "prefill-0",
            "exceeds-max-tokens",
            "9f1c2e7a4b6d4e0f8a1b2c3d4e5f6a7b",
            712455,
            681216,
            "logs/prefill-0.log",
            16,
        ),
        (
            "prefill-0",
            "input-too-long",
            "b7e0d1c25a3f4c6e9d8f7a6b5c4d3e2f",
            1002311,
            681215,
            "logs/prefill-0.log",
            19,
        ),
        (
            "prefill-0",
            "exceeds-max-tokens",
            "0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
            990001,
            681216,
            "logs/prefill-0.log",
            21,
        ),
    ]
    assert len(rows) == len(summary.evidence)
    ts = con.execute("SELECT ts FROM engine_evidence WHERE kind = 'input-too-long'").fetchone()
    assert str(ts[0]) == "2026-08-27 10:20:11+00:00"


def test_log_files_counts_add_up(case, con):
    summary = load_logs(con, case, _files(case))
    rows = con.execute(
        "SELECT path, node, engine, bytes, lines, parsed, truncated, ignored "
        "FROM log_files ORDER BY path"
    ).fetchall()
    assert rows == [
        (
            "logs/decode-0.log.gz",
            "decode-0",
            "sglang",
            (case / "logs/decode-0.log.gz").stat().st_size,
            16,
            9,
            0,
            7,
        ),
        (
            "logs/prefill-0.log",
            "prefill-0",
            "sglang",
            (case / "logs/prefill-0.log").stat().st_size,
            21,
            11,
            0,
            10,
        ),
    ]
    assert summary.lines_read == 37 and summary.lines_ignored == 17


def test_loading_twice_replaces(case, con):
    load_logs(con, case, _files(case))
    load_logs(con, case, _files(case))
    counts = [
        con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("nodes", "engine_evidence", "log_files")
    ]
    assert counts == [2, 6, 2]


def test_disagreement_with_the_nodes_file(case, con):
    con.execute(
        "INSERT INTO nodes (node, role, engine, page_size, pool_slots, context_len, "
        "src_file, src_row) VALUES ('prefill-0', 'prefill', 'SGLang', 64, 1048576, "
        "1048576, 'nodes.csv', 1), ('decode-0', 'decode', 'sglang', 64, 1409024, "
        "1048576, 'nodes.csv', 2)"
    )
    summary = load_logs(con, case, _files(case))
    assert summary.disagreements == [
        {
            "node": "prefill-0",
            "field": "pool_slots",
            "in_nodes": "1048576",
            "in_log": "681280",
            "nodes_file": "nodes.csv",
            "nodes_row": 1,
            "log_file": "logs/prefill-0.log",
            "log_line": 10,
        }
    ]
    # the file's row stays the node's one row; the log's start and the disagreement have
    # tables of their own
    assert con.execute("SELECT pool_slots FROM nodes WHERE node = 'prefill-0'").fetchall() == [
        (1048576,)
    ]
    assert con.execute(
        "SELECT pool_slots, src_file FROM node_starts WHERE node = 'prefill-0'"
    ).fetchall() == [(681280, "logs/prefill-0.log")]
    assert con.execute(
        "SELECT node, field, in_nodes, in_log FROM node_disagreements"
    ).fetchall() == [("prefill-0", "pool_slots", "1048576", "681280")]


def test_node_map_in_the_case_and_non_logs_skipped(case, con):
    (case / "logs" / "node_map.csv").write_text("node,file_glob\nprefill-east-0,prefill-*\n")
    summary = load_logs(con, case, _files(case))
    assert [n.node for n in summary.nodes] == ["decode-0", "prefill-east-0"]
    assert len(summary.files) == 2  # the CSV is not read as a log


def test_transaction_rollback_leaves_nothing(case, con):
    con.execute("BEGIN")
    load_logs(con, case, _files(case))
    con.execute("ROLLBACK")
    assert con.execute("SELECT count(*) FROM nodes").fetchone() == (0,)


def test_after_ingest_of_a_nodes_file(case, tmp_path):
    """With the case database as ingest leaves it: the nodes file's row is the node's row, the
    log's start is in node_starts and their disagreement is reported."""
    from forensics.db import connect
    from forensics.ingest.load import ingest_case

    (case / "nodes.csv").write_text(
        "node,role,model,engine,engine_version,page_size,pool_slots,context_len,started_at\n"
        "prefill-0,prefill,acme/longctx-70b,sglang,0.5.23,64,1048576,1048576,"
        "2026-08-27T09:58:01+00:00\n"
    )
    db = tmp_path / "case.duckdb"
    ingest_case(case, db)
    con = connect(db)
    try:
        con.execute("BEGIN TRANSACTION")
        summary = load_logs(con, case, _files(case))
        con.execute("COMMIT")
        rows = con.execute(
            "SELECT node, pool_slots, src_file FROM nodes ORDER BY node, src_file"
        ).fetchall()
        starts = con.execute(
            "SELECT node, pool_slots, src_file FROM node_starts ORDER BY node, src_file"
        ).fetchall()
    finally:
        con.close()
    assert rows == [
        ("decode-0", 1409024, "logs/decode-0.log.gz"),
        ("prefill-0", 1048576, "nodes.csv"),
    ]
    assert starts == [
        ("decode-0", 1409024, "logs/decode-0.log.gz"),
        ("prefill-0", 681280, "logs/prefill-0.log"),
    ]
    assert [(d["node"], d["field"], d["in_nodes"], d["in_log"]) for d in summary.disagreements] == [
        ("prefill-0", "pool_slots", "1048576", "681280")
    ]


def test_a_folder_and_a_missing_file(case, con):
    summary = load_logs(con, case, [Path("logs")])  # relative to the case, a folder
    assert [n.node for n in summary.nodes] == ["decode-0", "prefill-0"]
    with pytest.raises(InputError, match="log file not found"):
        load_logs(con, case, [case / "logs" / "gone.log"])
