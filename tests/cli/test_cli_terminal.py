"""Names from the case (file names, node names, files found in OUT) cannot drive or spoof the
terminal: what the commands print holds no escape sequence, carriage return or bidirectional
override, a name's newline is shown as \\n instead of starting a line of its own, and rich
markup in a name is shown as it is.

The checks read stderr as a terminal would receive it, not the code that wrote it."""

from __future__ import annotations

import json

import pytest
from rich.table import Table

from forensics.cli.app import console

# What a name may hold to drive a terminal: an escape sequence (colour, clear, window title), a
# bell, a carriage return (overwrites the start of the line), a bidirectional override.
HOSTILE = "x\x1b[2J\x1b]0;pwned\x07\rverify: all match\u202e\nerror: spoofed"
FORBIDDEN = ["\x1b", "\x07", "\r", "\u202e", "\x9b"]
SPOOF = ["verify: all match", "error: spoofed"]  # a line of its own only through a raw newline


def _inert(err: str) -> None:
    for char in FORBIDDEN:
        assert char not in err, (char, err)
    for line in err.splitlines():
        for spoof in SPOOF:
            assert not line.startswith(spoof), line


def _requests(decode: str = "decode-0") -> str:
    rows = [
        {
            "request_id": f"r{i}",
            "account_id": f"acct-{i % 2}",
            "model": "m",
            "received_at": f"2026-08-27T10:00:0{i}Z",
            "http_status": 200,
            "prompt_tokens": 4,
            "decode_node": decode,
        }
        for i in range(2)
    ]
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_a_skipped_files_name_is_shown_inert(case, cli, tmp_path) -> None:
    root = case({"requests.jsonl": _requests()})
    (root / f"notes{HOSTILE}.txt").write_text("not data")
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    assert code in (0, 1), err
    _inert(err)
    assert "notes" in err and "\\u001b" in err and "\\n" in err


def test_a_loaded_parts_markup_like_name_is_shown_as_it_is(case, cli, tmp_path) -> None:
    events = "ts,node,request_id,op,slot_start,slot_count\n2026-08-27T10:00:00Z,n,r0,alloc,0,4\n"
    root = case({"requests.jsonl": _requests(), "kv_events/[blink]p\x1b[1m.csv": events})
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    assert code in (0, 1), err
    _inert(err)
    assert "[blink]p" in err


def test_a_node_name_in_the_evidence_notes_is_shown_inert(case, cli, tmp_path) -> None:
    root = case({"requests.jsonl": _requests(decode=HOSTILE)})
    db = tmp_path / "c.duckdb"
    assert cli("ingest", root, "--db", db)[0] in (0, 1)
    code, _, err = cli("analyze", "--db", db)
    assert code in (0, 1), err
    _inert(err)
    assert "\\u001b[2J" in err  # the node is named, its controls as escapes


def test_a_file_added_to_out_is_named_inert_by_verify(case, cli, tmp_path) -> None:
    root = case({"requests.jsonl": _requests()})
    out = tmp_path / "out"
    assert cli("investigate", root, "--out", out)[0] in (0, 1)
    (out / f"added{HOSTILE}").write_text("x")
    code, _, err = cli("verify", out)
    assert code == 1
    _inert(err)
    assert "added" in err and "not in the manifest" in err


@pytest.mark.parametrize("markup", [True, False])
def test_the_console_escapes_controls_in_text_and_table_cells(capsys, markup) -> None:
    table = Table()
    table.add_column("name")
    table.add_row(HOSTILE)
    console.print(table)
    console.print(f"plain {HOSTILE}", markup=markup)
    err = capsys.readouterr().err
    for char in FORBIDDEN:
        assert char not in err, (char, err)
    assert "\\u001b[2J" in err and "\\r" in err and "\\u202e" in err
