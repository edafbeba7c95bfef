"""Every string from input is escaped: markup in account names, account ids, request ids and
node names never becomes markup in report.html or the HTML notices."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.report_case import HOSTILE, build_case, hostile_tables
from support.report_oracle import parse

from forensics.report.casedb import open_case
from forensics.report.stage import write_all

# Elements no output of ours contains; any of them in a page came from the data.
FOREIGN = {"script", "img", "iframe", "object", "embed", "svg-in-text", "b", "link"}


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile")
    db = build_case(tmp / "case.duckdb", hostile_tables())
    con = open_case(db)
    write_all(con, tmp / "out", case_label="hostile")
    con.close()
    return tmp / "out"


def _assert_inert(html: str) -> None:
    page = parse(html)
    tags = {t for t, _ in page.tags}
    assert not tags & FOREIGN, tags & FOREIGN
    for tag, attrs in page.tags:
        assert not [k for k in attrs if k.startswith("on")], (tag, attrs)


def test_report_escapes_every_input_string(out: Path) -> None:
    html = (out / "report.html").read_text(encoding="utf-8")
    _assert_inert(html)
    text = "".join(parse(html).text)
    # the hostile strings are there, as text: the request ids, the node name
    assert HOSTILE["B"] in text and HOSTILE["H"] in text and HOSTILE["n1"] in text
    # only matplotlib's own svg elements (the charts), none from the data's "<svg onload>"
    assert html.count("<svg") == html.count("</svg>")


def test_html_notices_escape_every_input_string(out: Path) -> None:
    notices = sorted((out / "notifications" / "notices").rglob("*.html"))
    assert len(notices) == 8
    for path in notices:
        html = path.read_text(encoding="utf-8")
        _assert_inert(html)
        assert not [t for t, _ in parse(html).tags if t == "svg"]
    receiving_b = [p for p in notices if "receiving" in p.parts and "acct-2" in p.name]
    text = "".join(parse(receiving_b[0].read_text(encoding="utf-8")).text)
    assert HOSTILE["B"] in text  # the account's own request id, shown as text
    assert 'Customer Two "><img src=x onerror=alert(4)><script>x</script>' in text


def test_markdown_notices_carry_no_raw_markup(out: Path) -> None:
    for path in (out / "notifications" / "notices").rglob("*.md"):
        text = path.read_text(encoding="utf-8")
        assert "<script" not in text and "<img" not in text and "<svg" not in text


def test_hostile_account_id_gives_a_safe_file_name(out: Path) -> None:
    names = [p.name for p in (out / "notifications" / "notices" / "receiving").iterdir()]
    assert all("<" not in n and ">" not in n and "/" not in n for n in names)
    assert len([n for n in names if n.startswith("_svg_onload_alert_3__-")]) == 2
