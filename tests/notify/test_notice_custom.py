"""--templates DIR: an examiner's notice template replaces the package's, is checked for every
field the package's shows (exit 2 naming the file and the field), runs sandboxed, and is
recorded with its SHA-256 (report --json, summary.json, investigate's manifest)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO
from support.report_case import build_case, seq_tables

from forensics.notify.templates import NOTICE_TEMPLATES, required_fields

PACKAGE = REPO / "templates"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_case(tmp_path_factory.mktemp("tpl") / "case.duckdb", seq_tables())


def _own(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_package_templates_show_what_a_notice_needs() -> None:
    """The required fields are read from the package's templates; they name the account, its
    counts and dates, the confidence and each request (a floor: the list follows the files)."""
    for name in NOTICE_TEMPLATES:
        need = required_fields(name)
        assert {
            "account.account_id",
            "account.name",
            "account.requests",
            "account.tokens",
            "account.first_affected_at",
            "account.last_affected_at",
            "confidence_text",
            "requests[].request_id",
        } <= need, name


def test_a_custom_template_replaces_the_package_one(db: Path, tmp_path: Path, cli: Any) -> None:
    package = (PACKAGE / "notice_receiving.md").read_text(encoding="utf-8")
    own = _own(tmp_path / "tpl", "notice_receiving.md", "CUSTOM WORDING\n" + package)
    code, stdout, _ = cli(
        "report", "--db", db, "--out", tmp_path / "out", "--templates", own.parent, "--json"
    )
    assert code == 1, stdout
    record = json.loads(stdout)["notice_templates"]
    digest = hashlib.sha256(own.read_bytes()).hexdigest()
    assert record["notice_receiving.md"] == {"source": "custom", "sha256": digest}
    shipped = hashlib.sha256((PACKAGE / "notice_leaking.md").read_bytes()).hexdigest()
    assert record["notice_leaking.md"] == {"source": "package", "sha256": shipped}
    notices = tmp_path / "out" / "notifications" / "notices"
    mine = sorted((notices / "receiving").glob("*.md"))
    assert mine and all(p.read_text().startswith("CUSTOM WORDING") for p in mine)
    assert not any("CUSTOM" in p.read_text() for p in (notices / "leaking").glob("*.md"))
    summary = json.loads((tmp_path / "out" / "notifications" / "summary.json").read_text())
    assert summary["notice_templates"] == record


def test_a_template_missing_a_field_is_refused(db: Path, tmp_path: Path, cli: Any) -> None:
    package = (PACKAGE / "notice_leaking.html").read_text(encoding="utf-8")
    assert "{{ account.tokens" in package
    text = package.replace("account.tokens if account.tokens is not none else", "")
    own = _own(tmp_path / "tpl", "notice_leaking.html", text)
    out = tmp_path / "out"
    code, _, stderr = cli("report", "--db", db, "--out", out, "--templates", own.parent)
    said = " ".join(stderr.split())
    assert code == 2 and str(own) in said and "missing account.tokens" in said, said
    assert not out.exists()


def test_templates_run_in_a_sandbox_with_html_escaped(db: Path, tmp_path: Path, cli: Any) -> None:
    package = (PACKAGE / "notice_receiving.html").read_text(encoding="utf-8")
    probe = "{{ account.account_id.__class__.__mro__[1].__subclasses__() }}"
    own = _own(tmp_path / "tpl", "notice_receiving.html", package.replace("<p>", probe + "<p>", 1))
    code, _, stderr = cli(
        "report", "--db", db, "--out", tmp_path / "out", "--templates", own.parent
    )
    assert code == 2 and "notice_receiving.html" in " ".join(stderr.split())
    # autoescape: a custom HTML notice that shows a value unfiltered still escapes it
    marked = package.replace("<p>", "<p data-id='{{ account.account_id }}'>{{ '<b>' }}", 1)
    own = _own(tmp_path / "tpl", "notice_receiving.html", marked)
    code, _, _ = cli("report", "--db", db, "--out", tmp_path / "o2", "--templates", own.parent)
    assert code == 1
    pages = list((tmp_path / "o2" / "notifications" / "notices" / "receiving").glob("*.html"))
    assert pages and all("&lt;b&gt;" in p.read_text() and "<b>" not in p.read_text() for p in pages)
