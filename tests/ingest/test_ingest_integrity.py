"""Every physical record is accounted for, and no single value crashes a stage.

Cut compressed files and CSV quoting errors stop ingest naming the file (and line); hostile
values are quarantined with a reason; hidden files and links outside the case are skipped and
listed."""

from __future__ import annotations

import gzip
import json
import os
import random

import pytest
import zstandard
from support.cases import query, write_file

REQ = "request_id,account_id,model,received_at,http_status,prompt_tokens\n"
EV = "ts,node,request_id,op,slot_start,slot_count,pos_start\n"


def _requests(n: int) -> str:
    return REQ + "".join(f"R{i},acct-{i % 7},m,2026-08-27T10:00:00Z,200,{i}\n" for i in range(n))


def _ingest(cli, root, tmp_path, *extra):
    code, out, err = cli("ingest", root, "--db", tmp_path / "c.duckdb", "--json", *extra)
    return code, out, " ".join(err.split())  # messages are wrapped to the terminal width


def _frames(data: bytes, kind: str, cuts: list[int]) -> tuple[bytes, list[int]]:
    """data compressed as several independent frames (members), split at the given offsets of
    the text; returns the bytes and the compressed offsets where each frame ends."""
    out, ends = b"", []
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        piece = data[a:b]
        out += (
            gzip.compress(piece, mtime=0)
            if kind == "gzip"
            else zstandard.ZstdCompressor().compress(piece)
        )
        ends.append(len(out))
    return out, ends


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_cut_compressed_file_stops_naming_it(case, cli, tmp_path, kind):
    text = _requests(4000).encode()
    whole = (
        gzip.compress(text, mtime=0)
        if kind == "gzip"
        else zstandard.ZstdCompressor(level=1).compress(text)
    )
    ext = "gz" if kind == "gzip" else "zst"
    rng = random.Random(7)
    positions = sorted(
        {
            1,
            10,
            len(whole) // 2,
            len(whole) - 1,
            len(whole) - 4,
            *(rng.randrange(1, len(whole)) for _ in range(4)),
        }
    )
    for cut in positions:
        root = case({})
        write_file(root / f"requests.csv.{ext}", whole[:cut])
        code, out, err = _ingest(cli, root, tmp_path)
        assert code == 2, (cut, out)
        assert f"requests.csv.{ext}" in err and "incomplete" in err and "Traceback" not in err
    root = case({})
    write_file(root / f"requests.csv.{ext}", whole)  # the whole file loads
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 0, err
    assert json.loads(out)["rows_loaded"] == 4000


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_file_cut_at_a_frame_boundary_stops(case, cli, tmp_path, kind):
    text = _requests(300).encode()
    data, ends = _frames(text, kind, [len(text) // 3 + 5, 2 * len(text) // 3 + 11])
    ext = "gz" if kind == "gzip" else "zst"
    for end in ends[:-1]:  # each boundary falls inside a line
        root = case({})
        write_file(root / f"requests.csv.{ext}", data[:end])
        code, _, err = _ingest(cli, root, tmp_path)
        assert code == 2 and f"requests.csv.{ext}" in err and "frame" in err, err
    root = case({})
    write_file(root / f"requests.csv.{ext}", data)  # every frame present: all rows
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 0, err
    assert json.loads(out)["rows_loaded"] == 300


def test_truncated_parquet_gz_names_the_file(case, cli, tmp_path):
    from support.cases import parquet_bytes

    rows = [
        {
            "request_id": f"R{i}",
            "account_id": "a",
            "model": "m",
            "received_at": "2026-08-27T10:00:00Z",
            "http_status": 200,
            "prompt_tokens": i,
        }
        for i in range(50)
    ]
    data = gzip.compress(parquet_bytes(rows), mtime=0)
    root = case({})
    write_file(root / "requests.parquet.gz", data[: len(data) // 2])
    code, _, err = _ingest(cli, root, tmp_path)
    assert code == 2 and "requests.parquet.gz" in err and "Traceback" not in err


def test_unterminated_quote_stops_with_the_line(case, cli, tmp_path):
    lines = _requests(2000).splitlines(keepends=True)
    lines[101] = 'R100,"acct-1,m,2026-08-27T10:00:00Z,200,5\n'  # physical line 102
    root = case({"requests.csv": "".join(lines)})
    code, _, err = _ingest(cli, root, tmp_path)
    assert code == 2, err
    assert "requests.csv" in err and "line 102" in err


def test_stray_quotes_never_swallow_rows(case, cli, tmp_path):
    lines = _requests(500).splitlines(keepends=True)
    lines[11] = 'R10,acct-1,"m,2026-08-27T10:00:00Z,200,5\n'  # line 12 opens
    lines[400] = 'R399,acct-1,m",2026-08-27T10:00:00Z,200,5\n'  # line 401 closes
    root = case({"requests.csv": "".join(lines)})
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 2, out
    assert "requests.csv" in err and "line 12" in err and "401" in err


def test_quoted_newline_inside_a_value_is_one_record(case, cli, tmp_path):
    text = (
        REQ
        + 'R1,acct-1,"model\nname",2026-08-27T10:00:00Z,200,5\n'
        + "R2,acct-2,m,2026-08-27T10:00:00Z,200,6\n"
    )
    root = case({"requests.csv": text})
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 0, err
    result = json.loads(out)
    assert result["rows_read"] == 2 and result["rows_loaded"] == 2
    assert query(tmp_path / "c.duckdb", "SELECT model FROM requests ORDER BY request_id")[0] == (
        "model\nname",
    )


def test_every_physical_line_is_counted(case, cli, tmp_path):
    """Blank lines are not records; every other line is loaded or quarantined, comment-looking
    lines included."""
    text = (
        REQ
        + "R1,a,m,2026-08-27T10:00:00Z,200,1\n\n#R2,a,m,2026-08-27T10:00:00Z,200,2\n"
        + "   \nR3,a,m\nR4,a,m,2026-08-27T10:00:00Z,200,4,extra\nR5,a,m,1,200,5"
    )
    root = case({"requests.csv": text})
    code, out, _ = _ingest(cli, root, tmp_path)
    result = json.loads(out)
    assert code == 1
    assert result["rows_read"] == 6  # R1, #R2, the blank-looking line, R3, R4, R5
    assert result["rows_loaded"] + result["rows_quarantined"] == 6
    assert ("#R2",) in query(tmp_path / "c.duckdb", "SELECT request_id FROM requests")


def test_duplicate_header_column_stops(case, cli, tmp_path):
    root = case({"requests.csv": REQ.strip() + ",model\nR1,a,m,2026-08-27T10:00:00Z,200,1,m2\n"})
    code, _, err = _ingest(cli, root, tmp_path)
    assert code == 2 and "model" in err and "twice" in err and "requests.csv" in err


def test_header_names_differing_only_in_case_stop_as_the_same_column(case, cli, tmp_path):
    """The CSV reader binds column names without regard to case: 'Model' beside 'model' is the
    same column twice, refused by ingest's own header check with both spellings, not by the
    reader's binder error."""
    root = case({"requests.csv": REQ.strip() + ",Model\nR1,a,m,2026-08-27T10:00:00Z,200,1,m2\n"})
    code, _, err = _ingest(cli, root, tmp_path)
    assert code == 2 and "requests.csv" in err
    assert "the header names the column 'model' twice (as 'model' and 'Model'" in err
    assert "Binder" not in err


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_other_delimiter_is_named(case, cli, tmp_path, sep):
    root = case({"requests.csv": REQ.replace(",", sep) + "R1" + sep + "a\n"})
    code, _, err = _ingest(cli, root, tmp_path)
    assert code == 2 and "requests.csv" in err and "delimiter" in err and "Traceback" not in err


@pytest.mark.parametrize("name", ["requests.csv", "requests.csv.gz", "requests.parquet"])
def test_empty_file_is_a_message(case, cli, tmp_path, name):
    root = case({})
    write_file(root / name, b"")
    code, _, err = _ingest(cli, root, tmp_path)
    assert code == 2 and "requests" in err and "Traceback" not in err and "internal" not in err


def test_case_path_that_is_a_file(cli, tmp_path):
    path = write_file(tmp_path / "requests.csv", _requests(1))
    code, _, err = cli("ingest", path, "--db", tmp_path / "c.duckdb")
    assert code == 2 and "is a file" in " ".join(err.split())


BAD_VALUES = [
    ("http_status", "9223372036854775807", "http_status must be an integer 100-599"),
    ("prompt_tokens", "99999999999999999999", "prompt_tokens must be an integer >= 0"),
    ("received_at", "10000-01-01T00:00:00Z", "years 0001-9999"),
    ("received_at", "0000-06-01T00:00:00Z", "years 0001-9999"),
    ("received_at", "9999-12-31T23:59:59-14:00", "years 0001-9999"),
    ("received_at", "999999999999999999", "years 0001-9999"),
    ("received_at", "9223372036854775807", "years 0001-9999"),
    ("received_at", "99999999999999999999", "years 0001-9999"),
    ("received_at", "-62135596800000001", "years 0001-9999"),
    ("received_at", "2026-08-27T10:00:00+14:30", "14:00"),
    ("received_at", "2026-08-27T10:00:00-2300", "14:00"),
]


@pytest.mark.parametrize(("column", "value", "why"), BAD_VALUES)
def test_out_of_range_values_are_quarantined(case, cli, tmp_path, column, value, why):
    row = {
        "request_id": "R1",
        "account_id": "a",
        "model": "m",
        "received_at": "2026-08-27T10:00:00Z",
        "http_status": "200",
        "prompt_tokens": "1",
        column: value,
    }
    root = case({"requests.csv": REQ + ",".join(row.values()) + "\n" + _requests(1)[len(REQ) :]})
    code, out, _ = _ingest(cli, root, tmp_path)
    assert code == 1 and json.loads(out)["rows_quarantined"] == 1
    [(col, val, reason)] = query(
        tmp_path / "c.duckdb", 'SELECT "column", "value", reason FROM quarantine'
    )
    assert (col, val) == (column, value) and why in reason


def test_edge_times_load_and_every_stage_copes(case, cli, tmp_path):
    req = REQ.strip() + ",first_token_at,completed_at\n"
    lo, hi = "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"
    root = case(
        {
            "requests.csv": req + f"A,acct-1,m,{lo},200,4,{lo},{hi}\nB,acct-2,m,{hi},200,4,{hi},\n",
            "kv_events.csv": EV
            + f"{lo},n1,A,alloc,0,4,\n{lo},n1,A,write,0,4,0\n{hi},n1,A,free,0,4,\n"
            f"{hi},n1,B,alloc,0,4,\n{hi},n1,B,read,0,4,0\n"
            f"{hi},n1,B,alloc,4611686018427387000,900,\n",
        }
    )
    out = tmp_path / "out"
    code, _, err = cli("investigate", root, "--out", out, "--aware-at", "2026-09-01T00:00:00Z")
    assert code == 1, err
    assert "Traceback" not in err
    assert (out / "report.html").is_file()
    rows = query(out / "case.duckdb", "SELECT receiver_request_id FROM exposures")
    assert rows == [("B",)]


def test_overflowing_slots_are_quarantined(case, cli, tmp_path):
    big = 2**63 - 1
    root = case(
        {
            "requests.csv": _requests(2),
            "kv_events.csv": EV + f"2026-08-27T10:00:00Z,n1,R1,alloc,{big},1,\n"
            f"2026-08-27T10:00:00Z,n1,R1,alloc,{2**40},{2**62},\n"
            f"2026-08-27T10:00:00Z,n1,R1,read,0,4,{2**40}\n"
            f"2026-08-27T10:00:00Z,n1,R1,alloc,0,{big + 1},\n",
            "nodes.csv": "node,pool_slots\nn1,100\n",
        }
    )
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 1, err
    assert json.loads(out)["tables"]["kv_events"]["rows_quarantined"] == 4


def test_nested_json_is_quarantined_not_loaded_as_text(case, cli, tmp_path):
    lines = [
        {
            "request_id": {"x": 1},
            "account_id": "a",
            "model": "m",
            "received_at": "2026-08-27T10:00:00Z",
            "http_status": 200,
            "prompt_tokens": 1,
        },
        {
            "request_id": "R2",
            "account_id": ["a"],
            "model": "m",
            "received_at": "2026-08-27T10:00:00Z",
            "http_status": 200,
            "prompt_tokens": 1,
        },
        {
            "request_id": "R3",
            "account_id": "a",
            "model": "m",
            "received_at": "2026-08-27T10:00:00Z",
            "http_status": 200,
            "prompt_tokens": 1,
        },
    ]
    contents = [
        {"request_id": "R3", "prompt_token_ids": [1, 2]},
        {"request_id": "R4", "prompt_token_ids": {"a": 1}},
    ]
    root = case(
        {
            "requests.jsonl": "".join(json.dumps(x) + "\n" for x in lines),
            "contents.jsonl": "".join(json.dumps(x) + "\n" for x in contents),
        }
    )
    code, out, _ = _ingest(cli, root, tmp_path)
    assert code == 1
    tables = json.loads(out)["tables"]
    assert tables["requests"]["rows_loaded"] == 1 and tables["requests"]["rows_quarantined"] == 2
    assert tables["contents"]["rows_loaded"] == 1
    reasons = [r for (r,) in query(tmp_path / "c.duckdb", "SELECT reason FROM quarantine")]
    assert any('"request_id" holds a JSON object' in r for r in reasons)
    assert any('"account_id" holds a JSON array' in r for r in reasons)


def test_hidden_files_are_skipped_and_listed(case, cli, tmp_path):
    root = case(
        {
            "requests.csv": _requests(3),
            "kv_events/part-1.csv": EV,
            "kv_events/._part-1.csv": "\x00\x05Mac OS X garbage",
            "kv_events/.part-2.csv": EV + "2026-08-27T10:00:00Z,n1,R1,alloc,0,1,\n",
            ".DS_Store": "x",
        }
    )
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 0, err
    skipped = {s["path"]: s["why"] for s in json.loads(out)["skipped"]}
    assert {"kv_events/._part-1.csv", "kv_events/.part-2.csv", ".DS_Store"} <= set(skipped)
    assert all("hidden" in skipped[p] for p in ("kv_events/._part-1.csv", ".DS_Store"))
    assert query(tmp_path / "c.duckdb", "SELECT count(*) FROM kv_events") == [(0,)]


def test_links_outside_the_case_are_not_followed(case, cli, tmp_path):
    secret = write_file(
        tmp_path / "elsewhere" / "secret.csv", "request_id,account_id\nTOPSECRET-VALUE,x\n"
    )
    root = case(
        {
            "requests.csv": _requests(2),
            "spare/events.csv": EV + "2026-08-27T10:00:00Z,n1,R1,alloc,0,1,\n",
        }
    )
    (root / "kv_events").mkdir()
    os.symlink(secret, root / "accounts.csv")
    os.symlink(secret.parent, root / "kv_events" / "more")
    os.symlink(root / "spare" / "events.csv", root / "kv_events" / "inside.csv")  # followed
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 0, err
    assert "TOPSECRET" not in out + err
    assert query(tmp_path / "c.duckdb", "SELECT count(*) FROM kv_events") == [(1,)]
    skipped = {s["path"]: s["why"] for s in json.loads(out)["skipped"]}
    assert "outside the case" in skipped["accounts.csv"]
    assert "kv_events/more" in skipped
    assert query(tmp_path / "c.duckdb", "SELECT count(*) FROM accounts") == [(0,)]
    code, out, err = _ingest(cli, root, tmp_path, "--follow-links")  # now both are read
    assert code == 2 and "kv_events/more/secret.csv" in err  # not a kv_events file
    os.unlink(root / "kv_events" / "more")
    code, out, err = _ingest(cli, root, tmp_path, "--follow-links")
    assert code == 0, err
    assert query(tmp_path / "c.duckdb", "SELECT account_id FROM accounts") == [("x",)]


def test_partial_seq_is_warned(case, cli, tmp_path):
    events = (
        "ts,seq,node,request_id,op,slot_start,slot_count,pos_start\n"
        "2026-08-27T10:00:00Z,1,n1,R1,alloc,0,4,\n2026-08-27T10:00:01Z,,n1,R1,free,0,4,\n"
        "2026-08-27T10:00:00Z,1,n2,R1,alloc,0,4,\n2026-08-27T10:00:01Z,2,n2,R1,free,0,4,\n"
    )
    root = case({"requests.csv": _requests(2), "kv_events.csv": events})
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 0
    assert json.loads(out)["warnings"] == 1
    [(reason,)] = query(tmp_path / "c.duckdb", "SELECT reason FROM ingest_warnings")
    assert "n1" in reason and "1 event(s) carry seq and 1 do not" in reason
    code, _, err = cli("ingest", root, "--db", tmp_path / "d.duckdb")
    assert "1 event(s) carry seq and 1 do not" in " ".join(err.split())


@pytest.mark.parametrize("compression", ["", ".gz"])
def test_large_jsonl_loads_in_parts_with_the_same_rows(
    case, cli, tmp_path, monkeypatch, compression
):
    import forensics.ingest.chunks as chunks

    lines = []
    for i in range(60):
        if i % 13 == 5:
            lines.append("{not json")  # quarantined with its physical line number
        else:
            lines.append(json.dumps({"request_id": f"R{i}", "prompt_token_ids": list(range(i))}))
    root = case({f"contents.jsonl{compression}": "\n".join(lines) + "\n"})
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 300)  # many parts
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 1, err
    result = json.loads(out)
    assert (result["rows_read"], result["rows_quarantined"]) == (60, 5)
    db = tmp_path / "c.duckdb"
    assert query(db, 'SELECT "row" FROM quarantine ORDER BY 1') == [
        (i + 1,) for i in range(60) if i % 13 == 5
    ]
    rows = query(db, "SELECT request_id, len(prompt_token_ids) FROM contents ORDER BY src_row")
    assert rows == [(f"R{i}", i) for i in range(60) if i % 13 != 5]
    assert not list(tmp_path.glob("**/part-*.jsonl"))


def test_quote_inside_an_unquoted_value_is_a_plain_character(case, cli, tmp_path):
    text = (
        REQ
        + 'R1,O"Brien,m,2026-08-27T10:00:00Z,200,1\nR2,b,m,2026-08-27T10:00:00Z,200,2\n'
        + 'R3,c"d,m,2026-08-27T10:00:00Z,200,3\nR4,"e ""q"", f",m,2026-08-27T10:00:00Z,200,4\n'
    )
    root = case({"requests.csv": text})
    code, out, err = _ingest(cli, root, tmp_path)
    assert code == 0, err
    assert query(tmp_path / "c.duckdb", "SELECT account_id FROM requests ORDER BY 1") == [
        ('O"Brien',),
        ("b",),
        ('c"d',),
        ('e "q", f',),
    ]


def test_quote_across_a_read_block_is_seen(case, cli, tmp_path, monkeypatch):
    """The scan reads in blocks; a quote in the line that straddles two blocks still counts."""
    import forensics.ingest.integrity as integrity

    monkeypatch.setattr(integrity, "CHUNK", 64)
    lines = _requests(40).splitlines(keepends=True)
    lines[20] = 'R19,"acct-1,m,2026-08-27T10:00:00Z,200,5\n'
    root = case({"requests.csv": "".join(lines)})
    code, _, err = _ingest(cli, root, tmp_path)
    assert code == 2 and "line 21" in err


def test_partial_seq_warning_reaches_the_run_summary_and_the_report(case, cli, tmp_path):
    events = (
        "ts,seq,node,request_id,op,slot_start,slot_count,pos_start\n"
        "2026-08-27T10:00:00Z,1,n1,R1,alloc,0,4,\n2026-08-27T10:00:01Z,,n1,R1,free,0,4,\n"
        "2026-08-27T10:00:02Z,,n1,R1,alloc,0,4,\n"
    )
    root = case({"requests.csv": _requests(2), "kv_events.csv": events})
    code, _, err = cli("investigate", root, "--out", tmp_path / "out")
    assert code in (0, 1), err
    said = "1 event(s) carry seq and 2 do not"
    assert said in " ".join(err.split())
    assert said in (tmp_path / "out" / "report.html").read_text()
