"""`kvforensics audit-logs`: exit codes, the --json shape, the node map, errors."""

from __future__ import annotations

import json
import shutil

from support.paths import DATA, REPO

LOGS = DATA / "logs"


def test_incident_does_not_fit_exit_1(cli):
    code, out, err = cli("audit-logs", LOGS / "incident", "--json")
    assert code == 1
    nodes = json.loads(out)
    assert isinstance(nodes, list) and [n["node"] for n in nodes] == ["decode-0", "prefill-0"]
    prefill = nodes[1]
    assert (prefill["pool_slots"], prefill["context_len"], prefill["fits"]) == (
        681280,
        1048576,
        False,
    )
    assert prefill["provenance"]["pool_slots"].endswith("incident/prefill-0.log:10")


def test_json_shape(cli):
    _, out, _ = cli("audit-logs", LOGS / "incident" / "decode-0.log.gz", "--json")
    (node,) = json.loads(out)
    required = {
        "node",
        "engine",
        "pool_slots",
        "context_len",
        "fits",
        "ratio",
        "page_size",
        "provenance",
        "runs",
        "started_at",
        "role",
        "model",
        "reason",
        "files",
    }
    assert required <= set(node)
    assert isinstance(node["fits"], bool) and isinstance(node["pool_slots"], int)
    assert all(":" in where for where in node["provenance"].values())


def test_fitting_vllm_node_exit_0(cli):
    code, out, _ = cli("audit-logs", LOGS / "vllm" / "chat-a.log", "--json")
    assert code == 0
    (node,) = json.loads(out)
    assert (node["engine"], node["pool_slots"], node["context_len"], node["fits"]) == (
        "vllm",
        2345216,
        131072,
        True,
    )


def test_table_output(cli):
    code, out, err = cli("audit-logs", LOGS / "incident")
    assert code == 1 and out == ""
    assert "prefill-0" in err and "681,280" in err and "too small" in err
    assert "37 lines read in 2 files: 20 parsed, 0 truncated, 17 ignored" in " ".join(err.split())


def test_no_capacity_lines_is_not_a_pass(cli, tmp_path):
    log = tmp_path / "gateway.log"
    log.write_text("nothing about KV here\n")
    code, out, _ = cli("audit-logs", log, "--json")
    (node,) = json.loads(out)
    assert code == 1 and node["fits"] is None and "not found" in node["reason"]


def test_node_map_option(cli, tmp_path):
    shutil.copy(LOGS / "vllm" / "chat-a.log", tmp_path / "host-17.log")
    mapping = tmp_path / "map.csv"
    mapping.write_text("node,file_glob\nchat-east-0,host-17*\n")
    code, out, _ = cli("audit-logs", tmp_path / "host-17.log", "--node-map", mapping, "--json")
    assert code == 0 and json.loads(out)[0]["node"] == "chat-east-0"


def test_errors_exit_2(cli, tmp_path):
    code, _, err = cli("audit-logs", tmp_path / "missing.log")
    assert code == 2 and "no such file" in " ".join(err.split())
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = cli("audit-logs", empty)
    assert code == 2 and "no log files" in err
    bad_map = tmp_path / "map.csv"
    bad_map.write_text("x,y\n")
    code, _, _ = cli("audit-logs", LOGS / "incident", "--node-map", bad_map)
    assert code == 2


def test_docs_document_engine_logs():
    section = (REPO / "docs" / "reference" / "engine-logs.md").read_text(encoding="utf-8")
    for must in (
        "node_map.csv",
        "audit-logs",
        "engine_evidence",
        "node_facts",
        "truncated",
        "Exit 0",
    ):
        assert must in section


def test_a_file_named_twice_is_read_once(cli):
    code, out, _ = cli(
        "audit-logs", LOGS / "incident", LOGS / "incident" / "prefill-0.log", "--json"
    )
    nodes = json.loads(out)
    assert [n["node"] for n in nodes] == ["decode-0", "prefill-0"]
    assert nodes[1]["files"] == [(LOGS / "incident" / "prefill-0.log").as_posix()]
