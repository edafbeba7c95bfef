"""The case database is never written into the case folder: the evidence would then hold a
file the tool wrote (a later ingest lists it as skipped, verify reports it as added), as
investigate already refuses for OUT."""

from __future__ import annotations

import json

import pytest

REQUESTS = json.dumps(
    {
        "request_id": "r1",
        "account_id": "a",
        "model": "m",
        "received_at": "2026-08-27T10:00:00Z",
        "http_status": 200,
        "prompt_tokens": 3,
    }
)


@pytest.mark.parametrize("where", ["case.duckdb", "sub/deeper/c.duckdb"])
def test_a_case_database_inside_the_case_folder_is_refused(case, cli, where) -> None:
    root = case({"requests.jsonl": REQUESTS + "\n"})
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    code, _, err = cli("ingest", root, "--db", root / where)
    text = " ".join(err.split())
    assert code == 2 and "--db" in text and "inside the case folder" in text, text
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_a_case_database_beside_the_case_folder_is_written(case, cli, tmp_path) -> None:
    root = case({"requests.jsonl": REQUESTS + "\n"})
    code, _, err = cli("ingest", root, "--db", tmp_path / "case.duckdb")
    assert code == 0, err
