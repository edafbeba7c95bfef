"""Every kind of bad row is quarantined with its file, row, column, value and reason; counts
add up per file; a missing required column stops the ingest with a clear message."""

from __future__ import annotations

import csv
import json

from support.cases import query

NODES = "node,role,page_size,pool_slots,context_len\nn1,decode,1,100,200\n"
REQUESTS = (
    "request_id,account_id,model,received_at,http_status,prompt_tokens\n"
    "A,acct-1,m,2026-08-27T10:00:00Z,200,4\n"  # row 1 ok
    "B,acct-2,m,2026-08-27T10:00:00,200,4\n"  # row 2 no offset
    "C,acct-3,m,yesterday,200,4\n"  # row 3 not a timestamp
    "D,acct-4,m,2026-08-27T10:00:00Z,twohundred,4\n"  # row 4 bad status
    "E,acct-5,m,2026-08-27T10:00:00Z,200\n"  # row 5 too few fields
    "A,acct-9,m,2026-08-27T10:00:00Z,200,4\n"  # row 6 duplicate request_id
    ",acct-6,m,2026-08-27T10:00:00Z,200,4\n"  # row 7 missing request_id
    "F,acct-7,m,2026-08-27T10:00:00Z,200,-3\n"  # row 8 negative prompt_tokens
)
EVENT = {
    "ts": "2026-08-27T10:00:00Z",
    "node": "n1",
    "request_id": "A",
    "op": "read",
    "slot_start": 0,
    "slot_count": 4,
    "pos_start": 0,
}


def _events() -> str:
    bad = [
        {},  # 1 ok
        {"op": "evict"},  # 2 op not allowed
        {"slot_count": 0},  # 3 slot_count must be > 0
        {"slot_start": -1},  # 5 slot_start >= 0
        {"slot_start": 98, "slot_count": 4},  # 7 past the pool of 100
        {"pos_start": None},  # 8 pos_start required for read
        {"request_id": "ghost"},  # 9 unknown request: kept, flagged
        {"seq": "x"},  # 10 seq not an integer
        {"slot_count": "4.0"},  # 11 not an integer
    ]  # comments give the line numbers after the two broken lines are inserted
    lines = [json.dumps({**EVENT, **b}) for b in bad]
    lines.insert(3, '{"ts": "2026-08-27T10:00:00Z", "node": "n1", broken')  # line 4 broken
    lines.insert(5, "[1, 2, 3]")  # line 6 not object
    return "\n".join(lines) + "\n"


def _quarantine(db):
    return query(
        db, 'SELECT file, "row", "column", "value", reason FROM quarantine ORDER BY file, "row"'
    )


def test_bad_rows_are_quarantined_with_reasons(case, cli, tmp_path):
    root = case({"nodes.csv": NODES, "requests.csv": REQUESTS, "kv_events.jsonl": _events()})
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", root, "--db", db, "--json")
    assert code == 1, err  # ran, but rows were quarantined
    got = {(f, r): (c, v, why) for f, r, c, v, why in _quarantine(db)}
    req = "requests.csv"
    assert got[(req, 2)][0] == "received_at" and "no UTC offset" in got[(req, 2)][2]
    assert got[(req, 3)][:2] == ("received_at", "yesterday")
    assert got[(req, 4)][:2] == ("http_status", "twohundred")
    assert "does not parse" in got[(req, 5)][2] and got[(req, 5)][1].startswith("E,acct-5")
    assert (
        got[(req, 6)][:2] == ("request_id", "A")
        and "first seen at requests.csv row 1" in (got[(req, 6)][2])
    )
    assert got[(req, 7)][0] == "request_id" and "missing" in got[(req, 7)][2]
    assert got[(req, 8)][:2] == ("prompt_tokens", "-3")
    ev = "kv_events.jsonl"
    assert got[(ev, 2)][:2] == ("op", "evict")
    assert got[(ev, 3)][:2] == ("slot_count", "0")
    assert got[(ev, 5)][:2] == ("slot_start", "-1")
    assert got[(ev, 6)][2] == "line is not a JSON object"
    assert "past the node's pool of 100" in got[(ev, 7)][2]
    assert got[(ev, 8)][0] == "pos_start"
    assert got[(ev, 10)][:2] == ("seq", "x")
    assert got[(ev, 11)][:2] == ("slot_count", "4.0")
    broken = [k for k, v in got.items() if k[0] == ev and v[2] == "line is not valid JSON"]
    assert broken == [(ev, 4)]
    # the unknown request is loaded and flagged, not quarantined
    assert (ev, 9) not in got
    assert query(db, "SELECT request_known FROM kv_events WHERE request_id = 'ghost'") == [(False,)]
    assert query(db, 'SELECT file, "row", "value" FROM ingest_warnings') == [(ev, 9, "ghost")]
    summary = json.loads(out)
    for f in summary["files"]:
        assert f["rows_read"] == f["rows_loaded"] + f["rows_quarantined"]
    by = {f["path"]: f for f in summary["files"]}
    assert (by[req]["rows_read"], by[req]["rows_loaded"]) == (8, 1)
    assert (by[ev]["rows_read"], by[ev]["rows_loaded"]) == (11, 2)


def test_counts_add_up_against_the_tables(case, cli, tmp_path):
    root = case({"nodes.csv": NODES, "requests.csv": REQUESTS, "kv_events.jsonl": _events()})
    db = tmp_path / "c.duckdb"
    cli("ingest", root, "--db", db)
    for table in ("requests", "kv_events", "nodes"):
        files = query(
            db,
            "SELECT path, rows_read, rows_loaded, rows_quarantined FROM input_files "
            "WHERE table_name = $t",
            {"t": table},
        )
        for path, read, loaded, quarantined in files:
            in_table = query(db, f"SELECT count(*) FROM {table} WHERE src_file = $p", {"p": path})
            in_q = query(db, "SELECT count(*) FROM quarantine WHERE file = $p", {"p": path})
            assert (in_table[0][0], in_q[0][0]) == (loaded, quarantined)
            assert read == loaded + quarantined


def test_quarantine_csv_written_by_investigate(case, cli, tmp_path):
    root = case({"nodes.csv": NODES, "requests.csv": REQUESTS, "kv_events.jsonl": _events()})
    code, _, _ = cli("investigate", root, "--out", tmp_path / "out")
    assert code == 1
    with (tmp_path / "out" / "quarantine.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {"file", "row", "column", "value", "reason"} <= set(rows[0])
    assert len(rows) == 7 + 9


def test_missing_required_column_stops_with_a_hint(case, cli, tmp_path):
    root = case(
        {
            "requests.csv": "request_id,acount_id,model,received_at,http_status,"
            "prompt_tokens\nA,x,m,2026-08-27T10:00:00Z,200,1\n"
        }
    )
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    assert code == 2
    assert "requests.csv" in err and "'account_id'" in err
    assert "acount_id" in err and "did you mean 'acount_id'" in err


def test_missing_column_in_jsonl(case, cli, tmp_path):
    root = case({"kv_events/p.jsonl": json.dumps({k: v for k, v in EVENT.items() if k != "op"})})
    code, _, err = cli("ingest", root, "--db", tmp_path / "c.duckdb")
    assert code == 2 and "kv_events/p.jsonl" in err and "'op'" in err


def test_unknown_files_are_listed_not_loaded(case, cli, tmp_path):
    root = case({"request.csv": REQUESTS, "notes.txt": "hello"})
    code, out, _ = cli("ingest", root, "--db", tmp_path / "c.duckdb", "--json")
    skipped = {s["path"]: s["why"] for s in json.loads(out)["skipped"]}
    assert "did you mean 'requests'" in skipped["request.csv"]
    assert "not a data file" in skipped["notes.txt"]


def test_json_lines_parsed_in_small_chunks_give_the_same_rows(case, cli, tmp_path, monkeypatch):
    """A JSON Lines file is parsed chunk by chunk (lines of a million token ids are megabytes).
    With chunks smaller than one line, every line is its own chunk, and a key used only by a
    later line must still be found (here the first line is no JSON object, so it has no keys):
    the same rows are loaded and quarantined, with the same reasons, as in one chunk."""
    from forensics.ingest import readers

    events = "not json\n" + _events()
    root = case({"nodes.csv": NODES, "requests.csv": REQUESTS, "kv_events.jsonl": events})
    tables = "SELECT * EXCLUDE (input_order) FROM kv_events ORDER BY src_row"
    results = []
    for chunk_bytes in (readers.JSON_CHUNK_BYTES, 1):
        monkeypatch.setattr(readers, "JSON_CHUNK_BYTES", chunk_bytes)
        db = tmp_path / f"c{chunk_bytes}.duckdb"
        code, _, err = cli("ingest", root, "--db", db)
        assert code == 1, err  # quarantined rows
        results.append((query(db, tables), _quarantine(db)))
    assert results[0] == results[1]
    assert len(results[1][0]) == 2  # lines 2 and 10 (the unknown request) are loaded


def test_a_case_whose_every_row_was_quarantined_says_why(case, cli, tmp_path) -> None:
    """Times in epoch seconds with a fraction (outside the contract): every request row is
    quarantined, and investigate, which then has nothing to analyse and writes no output
    folder, names the file, how many rows, the first one's column, value and reason."""
    rows = "".join(f"R{i},acct-{i},m,{1787824800 + i}.25,200,4\n" for i in range(3))
    folder = case(
        {
            "requests.csv": "request_id,account_id,model,received_at,http_status,"
            "prompt_tokens\n" + rows
        }
    )
    out = tmp_path / "out"
    code, _stdout, stderr = cli("investigate", str(folder), "--out", str(out))
    words = " ".join(stderr.split())
    assert code == 2 and not out.exists()
    assert "3 rows of requests.csv were quarantined (the first: row 1, received_at" in words
    assert "'1787824800.25': not a timestamp" in words
    assert "Fix: mend the quarantined rows" in words
