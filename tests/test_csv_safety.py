"""Every CSV file investigate writes is valid and spreadsheet-safe, and HTML and Markdown show
control characters escaped, whatever names and ids the inputs hold.

The checks read the files as a spreadsheet or CSV reader would, not the code that wrote them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

FORMULA_FIRST = ("=", "+", "-", "@", "\t", "\r")
HOSTILE_NAME = "  +SUM(A1) \u202eevil\u2066 *bold* [x](http://e.example) <b>\r\nnext"
ACCOUNTS = [  # (account_id, name) pairs: receiver, leaker
    ('=HYPERLINK("http://e.example")', HOSTILE_NAME),
    ("@cmd", "-2+3\x00nul"),
]
REQUESTS = ["\t=1+1", "-5"]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from forensics.cli import run

    root = tmp_path_factory.mktemp("hostile")
    case = root / "case"
    case.mkdir()
    (receiver, _), (leaker, _) = ACCOUNTS
    lines = [
        {
            "request_id": REQUESTS[1],
            "account_id": leaker,
            "model": "m",
            "received_at": "2026-08-27T10:00:00Z",
            "http_status": 200,
            "prompt_tokens": 4,
        },
        {
            "request_id": REQUESTS[0],
            "account_id": receiver,
            "model": "m\r\nx",
            "received_at": "2026-08-27T10:00:05Z",
            "http_status": 200,
            "prompt_tokens": 4,
        },
        {
            "request_id": "=bad",
            "account_id": "a",
            "model": "m",
            "received_at": "  =NOW()",  # a formula after blanks
            "http_status": 200,
            "prompt_tokens": 1,
        },  # quarantined: its value reaches the CSV
    ]
    (case / "requests.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (case / "accounts.jsonl").write_text(
        "".join(
            json.dumps(
                {"account_id": a, "name": n, "contact_email": "+x@e.example", "jurisdiction": "-EU"}
            )
            + "\n"
            for a, n in ACCOUNTS
        )
    )
    events = [
        ("2026-08-27T10:00:00Z", REQUESTS[1], "alloc", None),
        ("2026-08-27T10:00:01Z", REQUESTS[1], "write", 0),
        ("2026-08-27T10:00:02Z", REQUESTS[1], "free", None),
        ("2026-08-27T10:00:05Z", REQUESTS[0], "alloc", None),
        ("2026-08-27T10:00:06Z", REQUESTS[0], "read", 0),
    ]
    (case / "kv_events.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "ts": t,
                    "node": "-node\r1",
                    "request_id": r,
                    "op": op,
                    "slot_start": 0,
                    "slot_count": 4,
                    **({} if p is None else {"pos_start": p}),
                }
            )
            + "\n"
            for t, r, op, p in events
        )
    )
    code = run(["investigate", str(case), "--out", str(root / "out")])
    assert code == 1
    return root / "out"


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_every_csv_parses_with_one_width_and_no_formula(out: Path) -> None:
    files = sorted(out.rglob("*.csv"))
    assert {p.name for p in files} >= {
        "quarantine.csv",
        "timeline.csv",
        "receiving_accounts.csv",
        "leaking_accounts.csv",
        "affected_requests.csv",
    }
    for path in files:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle, strict=True))
        assert len(rows) >= 2, path
        assert {len(r) for r in rows} == {len(rows[0])}, path
        for row in rows[1:]:
            for cell in row:
                if cell and not _is_number(cell):
                    assert not cell.lstrip(" ").startswith(FORMULA_FIRST), (path.name, cell)


def test_cr_and_lf_inside_values_are_quoted(out: Path) -> None:
    raw = (out / "timeline.csv").read_bytes()
    # each physical line ending is LF; a CR only ever sits inside a quoted field
    with (out / "timeline.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert any("-node\r1" in cell for row in rows for cell in row)
    assert b'"\'-node\r1"' in raw  # a lone CR is quoted too
    names = {
        r[2]
        for r in csv.reader(
            (out / "notifications" / "receiving_accounts.csv").open(newline="", encoding="utf-8")
        )
    }
    # the value as ingest keeps it (without the blanks around it), neutralised, with its CR LF
    assert "'" + HOSTILE_NAME.strip(" ") in names


def test_neutralised_values_keep_their_text(out: Path) -> None:
    with (out / "notifications" / "affected_requests.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["request_id"] for r in rows} == {"'" + REQUESTS[0], "'" + REQUESTS[1]}
    assert {r["account_id"] for r in rows} == {"'" + a for a, _ in ACCOUNTS}
    json_rows = json.loads((out / "notifications" / "affected_requests.json").read_text())
    assert {r["request_id"] for r in json_rows} == set(REQUESTS)  # JSON keeps values as they are
    with (out / "quarantine.csv").open(newline="") as handle:
        q = list(csv.DictReader(handle))
    assert [r["value"] for r in q] == ["'  =NOW()"]  # the raw value, blanks and all


def test_html_and_markdown_show_controls_escaped(out: Path) -> None:
    pages = [*out.rglob("*.html"), *out.rglob("*.md")]
    assert len(pages) >= 5
    for path in pages:
        text = path.read_text(encoding="utf-8")
        for char in ("\u202e", "\u2066", "\x00"):
            assert char not in text, (path.name, repr(char))
    notice = next((out / "notifications" / "notices" / "receiving").glob("*.md")).read_text()
    assert "\\u202e" in notice and "\\u2066" in notice
    assert "\\*bold\\*" in notice and "\\[x\\]" in notice and "&lt;b&gt;" in notice
    # the line break is shown as \r\n (its backslashes escaped for Markdown); the heading stays
    # one line
    assert "\\\\r\\\\nnext" in notice and "\nnext" not in notice
    html = next((out / "notifications" / "notices" / "receiving").glob("*.html")).read_text()
    assert "\\u202eevil" in html and "<b>" not in html
    report = (out / "report.html").read_text()
    assert "\\u202e" in report or "evil" not in report
