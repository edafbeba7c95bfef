"""Every CSV file investigate writes is valid and spreadsheet-safe, and HTML and Markdown show
control characters escaped, whatever names and ids the inputs hold.

The checks read the files as a spreadsheet or CSV reader would, not the code that wrote them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from forensics.base.textsafe import csv_text

FORMULA_FIRST = ("=", "+", "-", "@", "\t", "\r")
HOSTILE_NAME = "  +SUM(A1) \u202eevil\u2066 *bold* [x](http://e.example) <b>\r\nnext"
ACCOUNTS = [  # (account_id, name) pairs: receiver, leaker
    ('=HYPERLINK("http://e.example")', HOSTILE_NAME),
    ("@cmd\u202etxt.exe", "-2+3\x00nul"),  # shown as @cmdexe.txt where U+202E acts
]
REQUESTS = ["\t=1+1", "-5\u2067\\x\x85"]
# what no CSV file may hold: C0 controls but TAB, DEL, C1 controls, bidirectional formatting
CSV_FORBIDDEN = [chr(c) for c in (*range(0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0))] + list(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


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


def test_controls_and_bidi_marks_are_escaped_in_every_csv(out: Path) -> None:
    files = sorted(out.rglob("*.csv"))
    for path in files:
        text = path.read_bytes().decode("utf-8")
        for char in CSV_FORBIDDEN:
            assert char not in text.replace("\n", ""), (path.name, repr(char))  # LF ends a record
        with path.open(newline="", encoding="utf-8") as handle:
            assert len(text.splitlines()) == len(list(csv.reader(handle))), path.name
    # each record is one physical line: a CR or LF in a value is written as \r or \n
    with (out / "timeline.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    raw = (out / "timeline.csv").read_bytes()
    assert len(raw.splitlines()) == len(rows)
    assert any("'-node\\r1" == cell for row in rows for cell in row)
    names = {
        r[2]
        for r in csv.reader(
            (out / "notifications" / "receiving_accounts.csv").open(newline="", encoding="utf-8")
        )
    }
    # the value as ingest keeps it (without the blanks around it), neutralised, its CR LF and
    # bidirectional controls written as escapes
    expected = "'+SUM(A1) \\u202eevil\\u2066 *bold* [x](http://e.example) <b>\\r\\nnext"
    assert expected == "'" + csv_text(HOSTILE_NAME.strip(" "))
    assert expected in names


def test_an_account_id_with_a_bidi_override_is_shown_as_it_is(out: Path) -> None:
    """U+202E in an account id would make a spreadsheet or Timesketch show '@cmdexe.txt': the
    CSV shows the escape instead, and the JSON keeps the exact value."""
    leaker = ACCOUNTS[1][0]
    shown = "'@cmd\\u202etxt.exe"
    for name in ("leaking_accounts.csv", "affected_requests.csv"):
        with (out / "notifications" / name).open(newline="", encoding="utf-8") as handle:
            ids = {r["account_id"] for r in csv.DictReader(handle)}
        assert shown in ids, name
    with (out / "timeline.csv").open(newline="", encoding="utf-8") as handle:
        cells = {
            c for r in csv.DictReader(handle) for c in (r["account_id"], r["other_account_id"])
        }
    assert shown in cells
    # a backslash is doubled, so an escape reads one way: \\x is the text, \u0085 the control
    with (out / "notifications" / "affected_requests.csv").open(newline="") as handle:
        requests = {r["request_id"] for r in csv.DictReader(handle)}
    assert "'-5\\u2067\\\\x\\u0085" in requests
    kept = json.loads((out / "notifications" / "leaking_accounts.json").read_text())
    assert leaker in {r["account_id"] for r in kept}


def test_neutralised_values_keep_their_text(out: Path) -> None:
    with (out / "notifications" / "affected_requests.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["request_id"] for r in rows} == {"'" + csv_text(r) for r in REQUESTS}
    assert {r["account_id"] for r in rows} == {"'" + csv_text(a) for a, _ in ACCOUNTS}
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


def _unescape(text: str) -> str:
    """The inverse of the CSV escape rule as the README states it."""
    named = {"\\": "\\", "n": "\n", "r": "\r"}
    out, i = [], 0
    while i < len(text):
        if text[i] != "\\":
            out.append(text[i])
            i += 1
        elif text[i + 1] == "u":
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
        else:
            out.append(named[text[i + 1]])
            i += 2
    return "".join(out)


def test_the_sql_and_python_csv_rules_agree_and_read_back() -> None:
    """kvf_csv_cell (DuckDB's CSV files) and textsafe.csv_cell write every character the same
    way, and the escapes read back to the value (a backslash is doubled, so \\u202e in a cell is
    the control and \\\\u202e the text)."""
    import random

    import duckdb

    from forensics.base.textsafe import csv_cell
    from forensics.casedb.sql import run_script, sql

    con = duckdb.connect()
    run_script(con, sql("schema/macros"))
    chars = [chr(c) for c in range(0x00, 0x250)] + [chr(c) for c in range(0x2000, 0x2070)]
    chars += ["\u061c", "\ufeff", "\U0001f600", "\\u202e"]
    rng = random.Random(47)
    values = chars + ["".join(rng.choices(chars, k=12)) for _ in range(300)]
    values += ["=1", "  -2", "\t+3", "\r=4", " \u202e=5", "\\", "plain"]
    got = [
        r[0] for r in con.execute("SELECT kvf_csv_cell(v) FROM unnest(?) t(v)", [values]).fetchall()
    ]
    con.close()
    for value, cell in zip(values, got, strict=True):
        assert cell == csv_cell(value), repr(value)
        assert cell in (csv_text(value), "'" + csv_text(value)), repr(value)
        assert _unescape(csv_text(value)) == value, repr(value)
        assert not any(c in cell for c in CSV_FORBIDDEN), repr(value)
