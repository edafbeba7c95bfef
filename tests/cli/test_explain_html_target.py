"""`explain --html FILE` writes a page and nothing else: it never writes over the case database
or any other file that is not an HTML page (evidence, a request log), and a folder given as
FILE is a clear usage error, not a traceback. Whatever it refuses is left byte for byte."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

REQUESTS = "".join(
    json.dumps(
        {
            "request_id": f"r{i}",
            "account_id": "a",
            "model": "m",
            "received_at": f"2026-08-27T10:00:0{i}Z",
            "http_status": 200,
            "prompt_tokens": 3,
        }
    )
    + "\n"
    for i in range(2)
)


@pytest.fixture
def db(case, cli, tmp_path) -> Path:
    path = tmp_path / "c.duckdb"
    assert cli("ingest", case({"requests.jsonl": REQUESTS}), "--db", path)[0] == 0
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(cli, db: Path, target: Path, word: str) -> None:
    before = _digest(target) if target.is_file() else None
    code, out, err = cli("explain", "r1", "--db", db, "--html", target)
    text = " ".join(err.split())
    assert code == 2, text
    assert "--html" in text and word in text and "Traceback" not in text, text
    if before is not None:
        assert _digest(target) == before


def test_the_case_database_is_never_written_over(cli, db) -> None:
    _refused(cli, db, db, "case database")
    assert cli("explain", "r1", "--db", db)[0] == 0  # still a case database


def test_a_file_that_is_not_an_html_page_is_never_written_over(cli, db, case) -> None:
    log = case({"requests.jsonl": REQUESTS}) / "requests.jsonl"
    _refused(cli, db, log, "not an HTML page")


def test_a_folder_is_a_usage_error(cli, db, tmp_path) -> None:
    _refused(cli, db, tmp_path, "folder")


def test_a_new_file_and_an_earlier_page_are_written(cli, db, tmp_path) -> None:
    page = tmp_path / "pages" / "r1.html"
    for _ in range(2):  # new, then over the page it wrote
        code, _, err = cli("explain", "r1", "--db", db, "--html", page)
        assert code == 0, err
        assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not [p for p in page.parent.iterdir() if p.name != "r1.html"]  # no temporary left


def test_a_page_that_cannot_be_written_is_a_usage_error(cli, db, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _refused(cli, db, blocker / "page.html", "cannot write")
