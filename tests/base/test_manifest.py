"""The manifest names every input with its checksum and counts, and is byte-identical for the
same inputs apart from the run's times."""

from __future__ import annotations

import hashlib
import json
import re

from support.paths import EXAMPLES

VOLATILE = ("started_at", "finished_at", "generated_at", "run_id")


def _stable(path):
    data = json.loads(path.read_text())
    for key in VOLATILE:
        data.pop(key)
    # DuckDB's file layout is not byte-reproducible: the case database is listed with its own
    # checksum. The report names its run (generation time, run id): it is compared apart, with
    # those values taken out. Every other output must be identical.
    apart = ("case.duckdb", "report.html")
    data["outputs"] = [o for o in data["outputs"] if o["path"] not in apart]
    return data


def _without_run(path):
    """The report with the run's own instants (generation time, run id) replaced."""
    text = path.read_text(encoding="utf-8")
    for figure in ("generated_at", "run_id"):
        value = re.search(rf'data-figure="{figure}" data-value="([^"]+)"', text)
        assert value, f"the report names no {figure}"
        text = text.replace(value.group(1), f"<{figure}>")
    return text


def test_manifest_lists_inputs_with_checksums(cli, tmp_path):
    case = EXAMPLES / "semantics-ties"
    code, _, err = cli("investigate", case, "--out", tmp_path / "out")
    assert code in (0, 1), err
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    paths = [i["path"] for i in manifest["inputs"]]
    assert paths == ["kv_events/part-1.jsonl", "kv_events/part-2.csv", "nodes.csv", "requests.csv"]
    for item in manifest["inputs"]:
        digest = hashlib.sha256((case / item["path"]).read_bytes()).hexdigest()
        assert item["sha256"] == digest
        assert item["bytes"] == (case / item["path"]).stat().st_size
        assert item["rows_read"] == item["rows_loaded"] + item["rows_quarantined"]
    assert manifest["tool"]["name"] == "kvforensics"
    assert all(len(v) == 64 for v in manifest["queries"].values())
    assert "ingest/validate_kv_events" in manifest["queries"]
    assert manifest["parameters"]["assume_utc"] is False


def test_manifest_is_deterministic(cli, tmp_path):
    case = EXAMPLES / "semantics-seq"
    cli("investigate", case, "--out", tmp_path / "a")
    cli("investigate", case, "--out", tmp_path / "b")
    a, b = _stable(tmp_path / "a" / "manifest.json"), _stable(tmp_path / "b" / "manifest.json")
    a.pop("command"), b.pop("command")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    report_a, report_b = tmp_path / "a" / "report.html", tmp_path / "b" / "report.html"
    assert report_a.read_bytes() != report_b.read_bytes()  # each names its own run
    assert _without_run(report_a) == _without_run(report_b)
