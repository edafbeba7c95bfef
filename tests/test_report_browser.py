"""Open report.html in headless chromium: no console errors, no network requests, and the
headline figures on the page equal those computed from the exposures table. Saves
test-artifacts/report.png. Skipped when no chromium is installed (.ci/install-browser)."""

from __future__ import annotations

from pathlib import Path

import pytest
from headless import find_chromium, visit
from report_case import _exposure, add_rows, build_case, seq_tables
from report_oracle import headline_from_exposures

from forensics.report.casedb import open_case
from forensics.report.stage import write_all

BROWSER = find_chromium()
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
FIGURES_JS = (
    "JSON.stringify({figures: Object.fromEntries([...document.querySelectorAll('[data-figure]')]"
    ".map(e => [e.dataset.figure, [e.dataset.value, e.textContent.trim()]])),"
    " masthead: getComputedStyle(document.querySelector('.masthead')).backgroundColor})"
)

pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="no chromium on PATH; run .ci/install-browser (apt-get install chromium)",
)
pytest.importorskip("websocket", reason="websocket-client (test extra) is not installed")


def test_report_in_a_real_browser(tmp_path: Path) -> None:
    tables = seq_tables()
    add_rows(tables, "exposures", [  # a same-account exposure too: H <- A, both acct-1
        _exposure("H", "acct-1", "A", "acct-1", 0, 3, (0, 2), "2026-08-27T10:00:07.0004Z",
                  "2026-08-27T10:00:00.0001Z", "stale")])
    db = build_case(tmp_path / "case.duckdb", tables)
    con = open_case(db)
    write_all(con, tmp_path / "out", case_label="semantics-seq")
    con.close()

    assert BROWSER is not None
    page = visit(BROWSER, tmp_path / "out" / "report.html",
                 {"screen": ARTIFACTS / "report.png", "print": ARTIFACTS / "report-print.png"},
                 FIGURES_JS)

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
