"""A case that holds neither a request nor a KV ledger event is not a case in which nothing
happened: investigate and analyze stop (exit 2) saying so, and no OUT is written that reads as
"nothing to report" (exit 0, a report finding no exposure)."""

from __future__ import annotations

import json

import pytest

REQUEST = {
    "request_id": "r1",
    "account_id": "a",
    "model": "m",
    "received_at": "2026-08-27T10:00:00Z",
    "http_status": 200,
    "prompt_tokens": 3,
}
CASES = {
    "empty folder": {},
    "misnamed files": {"request.csv": "request_id\nr1\n", "kv_event.jsonl": "{}\n"},
    "only a directory": {"accounts.csv": "account_id,name\na,A\n"},
    "every request quarantined": {
        "requests.jsonl": json.dumps({**REQUEST, "received_at": "yesterday"}) + "\n"
    },
}


@pytest.mark.parametrize("files", CASES.values(), ids=CASES.keys())
def test_investigate_stops_and_writes_no_out(case, cli, tmp_path, files) -> None:
    root = case(files)
    root.mkdir(exist_ok=True)
    out = tmp_path / "out"
    code, _, err = cli("investigate", root, "--out", out)
    text = " ".join(err.split())
    assert code == 2, text
    assert "no request" in text and "no KV ledger" in text and "Traceback" not in text
    assert not out.exists()


def test_analyze_stops_on_such_a_case_database(case, cli, tmp_path) -> None:
    root = case(CASES["misnamed files"])
    db = tmp_path / "c.duckdb"
    assert cli("ingest", root, "--db", db)[0] == 0
    code, _, err = cli("analyze", "--db", db)
    text = " ".join(err.split())
    assert code == 2 and "no request" in text and "no KV ledger" in text


@pytest.mark.parametrize(
    "files",
    [
        {"requests.jsonl": json.dumps(REQUEST) + "\n"},
        {
            "kv_events.jsonl": json.dumps(
                {
                    "ts": "2026-08-27T10:00:00Z",
                    "node": "n",
                    "request_id": "r1",
                    "op": "alloc",
                    "slot_start": 0,
                    "slot_count": 4,
                }
            )
            + "\n"
        },
    ],
    ids=["requests only", "ledger only"],
)
def test_a_request_log_or_a_ledger_alone_is_analysed(case, cli, tmp_path, files) -> None:
    """Analysed, not stopped. A request log alone (no node, no pool, no first token, no cached
    tokens) gives nothing to look for a stub with: that is said, and the exit code is 1, not the
    0 of a case examined and found clean."""
    root = case(files)
    code, _, err = cli("investigate", root, "--out", tmp_path / "out")
    text = " ".join(err.split())
    if "requests.jsonl" in files:
        assert code == 1 and "stubs could not be looked for in 1 requests" in text, text
    else:
        assert code == 0, err
    assert (tmp_path / "out" / "manifest.json").is_file()
