"""Per-account notices: both sides, both formats, the required headings, no counterpart named."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.report_case import build_case, seq_tables
from support.report_oracle import parse

from forensics.report.casedb import open_case
from forensics.report.stage import write_all

HEADINGS = (
    "What Happened",
    "What Information Was Involved",
    "What We Are Doing",
    "What You Can Do",
    "For More Information",
)


@pytest.fixture(scope="module")
def notices(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("notices")
    con = open_case(build_case(tmp / "case.duckdb", seq_tables()))
    write_all(con, tmp / "out")
    con.close()
    return tmp / "out" / "notifications" / "notices"


def test_one_notice_per_account_and_side(notices: Path) -> None:
    # hand-worked from expected_accounts.csv
    assert sorted(p.name for p in (notices / "receiving").iterdir()) == sorted(
        f"acct-{n}.{ext}" for n in (1, 2, 4, 6) for ext in ("md", "html")
    )
    assert sorted(p.name for p in (notices / "leaking").iterdir()) == sorted(
        f"acct-{n}.{ext}" for n in (1, 2, 4, 7) for ext in ("md", "html")
    )


def test_headings_in_order(notices: Path) -> None:
    for path in notices.rglob("*.md"):
        lines = [line[3:] for line in path.read_text().splitlines() if line.startswith("## ")]
        assert tuple(lines) == HEADINGS, path
    for path in notices.rglob("*.html"):
        page = parse(path.read_text())
        assert [t for t, _ in page.tags].count("h2") == 5
        text = "".join(page.text)
        assert [text.index(h) for h in HEADINGS] == sorted(text.index(h) for h in HEADINGS)


def test_sides_say_different_things(notices: Path) -> None:
    receiving = (notices / "receiving" / "acct-2.md").read_text()
    leaking = (notices / "leaking" / "acct-2.md").read_text()
    assert "delete the responses" in receiving and "delete the responses" not in leaking
    assert "data from your requests" in leaking
    assert "| B | 27 August 2026, 10:00 UTC | 6 |" in receiving  # B received 6 tokens
    assert "| B | 27 August 2026, 10:00 UTC | 2 |" in leaking  # B's data: 2 tokens to H
    assert "On 27 August 2026, 10:00 UTC, 1 of your requests received" in receiving


def test_no_counterpart_named(notices: Path) -> None:
    # acct-2 received A's data (acct-1, Customer One) and leaked to H (acct-1)
    for side in ("receiving", "leaking"):
        for ext in ("md", "html"):
            text = (notices / side / f"acct-2.{ext}").read_text()
            assert "acct-1" not in text and "Customer One" not in text
            assert "| A |" not in text and "| H |" not in text and ">A<" not in text


def test_possible_only_account_without_times(tmp_path: Path) -> None:
    """A screened (possible) receiver has no token count and no times."""
    tables = seq_tables()
    tables["affected_requests"].append(
        {
            "side": "receiving",
            "request_id": "C",
            "account_id": "acct-3",
            "confidence": "possible",
            "tokens": None,
            "counterpart_requests": 2,
            "first_affected_at": None,
            "last_affected_at": None,
        }
    )
    tables["affected_accounts"].append(
        {
            "side": "receiving",
            "account_id": "acct-3",
            "confidence": "possible",
            "requests": 1,
            "tokens": None,
            "first_affected_at": None,
            "last_affected_at": None,
            "counterpart_accounts": 2,
        }
    )
    con = open_case(build_case(tmp_path / "case.duckdb", tables))
    write_all(con, tmp_path / "out")
    con.close()
    text = (tmp_path / "out" / "notifications" / "notices" / "receiving" / "acct-3.md").read_text()
    assert "During the period under investigation, 1 of your requests" in text
    assert "an unknown number of\ntokens" in text or "an unknown number of tokens" in text
    assert "Our finding is possible:" in text
    assert "| C | an unknown time | unknown |" in text


def test_every_notice_is_marked_draft(notices: Path) -> None:
    files = list(notices.rglob("*.md")) + list(notices.rglob("*.html"))
    assert len(files) == 16
    for path in files:
        text = path.read_text()
        head = text[: text.index("What Happened")]  # before the first section
        assert "DRAFT" in head, path
