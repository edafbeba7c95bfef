"""Open report.html in headless chromium: no console errors, no network requests, and the
headline figures on the page equal those computed from the exposures table; the per-account
tables list the accounts of the case's affected_accounts table. The page is also printed to PDF
as a reader's browser would: the pages carry page numbers ("Page n of N"). Saves
test-artifacts/report.png, report-print.png, report.pdf and one PNG per printed page
(report-page-N.png, with poppler's pdftoppm). Skipped when no chromium is installed
(.ci/install-browser)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support.headless import find_chromium, visit
from support.paths import REPO
from support.report_case import _exposure, add_rows, build_case, seq_tables
from support.report_oracle import headline_from_exposures

from forensics.report.casedb import open_case
from forensics.report.stage import write_all

BROWSER = find_chromium()
ARTIFACTS = REPO / "test-artifacts"
FIGURES_JS = (
    "JSON.stringify({figures: Object.fromEntries([...document.querySelectorAll('[data-figure]')]"
    ".map(e => [e.dataset.figure, [e.dataset.value, e.textContent.trim()]])),"
    " masthead: getComputedStyle(document.querySelector('.masthead')).backgroundColor,"
    " accounts: Object.fromEntries(['receiving', 'leaking'].map(side => [side,"
    " [...document.querySelectorAll('#accounts-' + side + ' tbody tr')]"
    ".map(tr => [...tr.cells].map(td => td.textContent.trim()))]))})"
)

pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="no chromium on PATH; run .ci/install-browser (apt-get install chromium)",
)
pytest.importorskip("websocket", reason="websocket-client (test extra) is not installed")


def test_report_in_a_real_browser(tmp_path: Path) -> None:
    tables = seq_tables()
    add_rows(
        tables,
        "exposures",
        [  # a same-account exposure too: H <- A, both acct-1
            _exposure(
                "H",
                "acct-1",
                "A",
                "acct-1",
                0,
                3,
                (0, 2),
                "2026-08-27T10:00:07.0004Z",
                "2026-08-27T10:00:00.0001Z",
                "stale",
            )
        ],
    )
    db = build_case(tmp_path / "case.duckdb", tables)
    con = open_case(db)
    write_all(
        con,
        tmp_path / "out",
        case_label="semantics-seq",
        manifest={"run_id": "2026-08-28T07:00:00.000000Z"},
    )
    con.close()

    assert BROWSER is not None
    for old in ARTIFACTS.glob("report-page-*.png"):
        old.unlink()
    page = visit(
        BROWSER,
        tmp_path / "out" / "report.html",
        {"screen": ARTIFACTS / "report.png", "print": ARTIFACTS / "report-print.png"},
        FIGURES_JS,
        pdf=ARTIFACTS / "report.pdf",
    )

    assert page.console_errors == []
    assert page.requests == []
    expected = headline_from_exposures(tables["exposures"])
    screen = page.values["screen"]
    assert {name: int(screen["figures"][name][0]) for name in expected} == expected
    shown = {name: int(screen["figures"][name][1].replace(",", "")) for name in expected}
    assert shown == expected
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000
    # the print style drops the dark masthead
    assert screen["masthead"] != "rgba(0, 0, 0, 0)"
    assert page.values["print"]["masthead"] == "rgba(0, 0, 0, 0)"

    # the header names the generation time, the run and the tool version
    figures = screen["figures"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", figures["generated_at"][0])
    assert figures["run_id"][0] == "2026-08-28T07:00:00.000000Z"
    from forensics import __version__

    assert figures["tool_version"][1] == __version__
    # per-account tables for both sides: the accounts of affected_accounts, with their counts
    for side in ("receiving", "leaking"):
        want = sorted(
            (a["account_id"], str(a["requests"]), str(a["tokens"]))
            for a in tables["affected_accounts"]
            if a["side"] == side
        )
        got = sorted((row[0], row[3], row[4]) for row in screen["accounts"][side])
        assert got == want, side


def test_report_printed_to_pdf_has_page_numbers(tmp_path: Path) -> None:
    if shutil.which("pdftotext") is None or shutil.which("pdftoppm") is None:
        pytest.skip("poppler-utils (pdftotext, pdftoppm) not installed; .ci/install-browser")
    db = build_case(tmp_path / "case.duckdb", seq_tables())
    con = open_case(db)
    write_all(con, tmp_path / "out", case_label="semantics-seq")
    con.close()
    assert BROWSER is not None
    pdf = ARTIFACTS / "report.pdf"
    visit(
        BROWSER,
        tmp_path / "out" / "report.html",
        {"print": ARTIFACTS / "report-print.png"},
        FIGURES_JS,
        pdf=pdf,
    )
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    pages = text.split("\f")[:-1] if text.endswith("\f") else text.split("\f")
    total = len(pages)
    assert total >= 2
    for number, body in enumerate(pages, start=1):
        assert f"Page {number} of {total}" in body, number
    # the query checksums are folded by stage: a printed report names the stages, not each
    # query and its SHA-256
    assert "Queries" in text and "report/headline" not in text and "figures/headline" not in text
    for old in ARTIFACTS.glob("report-page-*.png"):
        old.unlink()
    subprocess.run(
        ["pdftoppm", "-r", "60", "-png", str(pdf), str(ARTIFACTS / "report-page")], check=True
    )
    assert len(list(ARTIFACTS.glob("report-page-*.png"))) == total
