"""A column of an input file that is not in the contract is not loaded, and is warned of once
per table and column (forensics.case.columns): in ingest_warnings, in ingest's summary and in
the notes the report repeats. The expected reasons are written out here in full; the loaded
rows are compared with a load of the same files without the extra columns."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.paths import SAMPLE

from forensics.cli import app
from forensics.errors import InputError
from forensics.ingest.load import ingest_case, input_notes
from forensics.ledger.store import ExternalLedger

WARNINGS = 'SELECT table_name, file, "row", "column", "value", reason FROM ingest_warnings'


def _case(root: Path) -> Path:
    case = root / "case"
    shutil.copytree(SAMPLE, case)
    return case


def _rename_csv_column(path: Path, old: str, new: str, extra: str | None = None) -> None:
    rows = list(csv.reader(path.open(newline="")))
    rows[0] = [new if h == old else h for h in rows[0]]
    if extra is not None:
        rows[0].append(extra)
        for row in rows[1:]:
            row.append("x")
    with path.open("w", newline="") as out:
        csv.writer(out).writerows(rows)


def _warnings(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(WARNINGS + " ORDER BY ALL").fetchall()
    finally:
        con.close()


def _count(db: Path, text: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute(text).fetchall()[0][0])
    finally:
        con.close()


def test_a_misnamed_and_an_unknown_csv_column_are_each_warned_of_with_a_fix(tmp_path) -> None:
    case = _case(tmp_path)
    _rename_csv_column(
        case / "requests.csv", "completion_tokens", "completion_token", "user\tagent\u202e<b>"
    )
    db = tmp_path / "case.duckdb"
    result = ingest_case(case, db)
    first = (
        "column 'completion_token' is not one of the requests table's columns and was not "
        "loaded; did you mean 'completion_tokens'? Rename the column"
    )
    second = (
        "column 'user\\tagent\\u202e<b>' is not one of the requests table's columns and was "
        "not loaded; if it holds one of the table's columns, rename it to that column's name"
    )
    assert _warnings(db) == [
        ("requests", "requests.csv", None, "completion_token", None, first),
        ("requests", "requests.csv", None, "user\tagent\u202e<b>", None, second),
    ]
    assert result.notes == [first, second]
    assert result.warnings == 2
    # the rows are loaded all the same, the misnamed column left empty
    assert _count(db, "SELECT count(*) FROM requests") == 400
    assert _count(db, "SELECT count(completion_tokens) FROM requests") == 0


def test_blank_csv_header_names_are_labelled_by_their_place(tmp_path) -> None:
    """Two blank header names (as a spreadsheet's empty headings or a trailing comma give) are
    each warned of by their place, not refused as one column named twice; a real column named
    as the reader would otherwise have named a blank one is a column of its own, so every row
    still has as many fields as the header."""
    case = _case(tmp_path)
    _add_csv_columns(case / "requests.csv", ["", "column14", "(blank header field 16)", ""])
    db = tmp_path / "case.duckdb"
    result = ingest_case(case, db)
    # the last blank one's label is taken by a real column: it gets a mark of its own
    names = ["(blank header field 13)", "(blank header field 16)", "(blank header field 16)'"]
    names += ["column14"]
    assert sorted(w[3] for w in _warnings(db)) == sorted(names)
    assert result.notes == [
        "4 columns are not among the requests table's columns and were not loaded: "
        + ", ".join(f"'{n}'" for n in sorted(names))
        + " (one warning each in ingest_warnings)"
    ]
    assert _count(db, "SELECT count(*) FROM quarantine") == 0
    assert _count(db, "SELECT count(*) FROM requests") == 400
    # the contract's columns keep their values: the sample's own, column by column
    rows = list(csv.DictReader((SAMPLE / "requests.csv").open(newline="")))
    con = duckdb.connect(str(db), read_only=True)
    try:
        loaded = dict(con.execute("SELECT request_id, decode_node FROM requests").fetchall())
    finally:
        con.close()
    assert loaded == {r["request_id"]: r["decode_node"] for r in rows}


def test_a_request_log_written_with_a_space_after_each_comma_loads_as_the_sample(tmp_path):
    """`request_id, account_id, ...`: the header's names and every value are taken without the
    blank after each comma (the response hash and the model name too, which were quarantined
    and kept with the blank), so the requests table is the sample's, row for row."""
    plain, spaced = tmp_path / "plain", tmp_path / "spaced"
    for root in (plain, spaced):
        _case(root)
    text = (SAMPLE / "requests.csv").read_text()
    assert '"' not in text  # no quoted comma for the rewrite below to break
    (spaced / "case" / "requests.csv").write_text(text.replace(",", ", "))
    results = [ingest_case(root / "case", root / "case.duckdb") for root in (plain, spaced)]
    assert results[1].rows_quarantined == results[0].rows_quarantined == 0
    con = duckdb.connect(str(plain / "case.duckdb"), read_only=True)
    try:
        con.execute(f"ATTACH '{spaced / 'case.duckdb'}' AS spaced (READ_ONLY)")
        for a, b in (("requests", "spaced.requests"), ("spaced.requests", "requests")):
            assert con.execute(f"SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}").fetchall() == []
        assert con.execute("SELECT count(*) FROM spaced.requests").fetchall() == [(400,)]
    finally:
        con.close()


def test_nodes_and_accounts_written_with_a_space_after_each_comma_load_as_the_sample(tmp_path):
    """Descriptive text is kept as every id is, without the blanks around it: a name, an
    address or a jurisdiction with a blank before it would reach the notices as it is (and
    ` US-NY` would count apart from `US-NY`), and a node's role ` decode` was quarantined."""
    plain, spaced = tmp_path / "plain", tmp_path / "spaced"
    for root in (plain, spaced):
        _case(root)
    for name in ("nodes.csv", "accounts.csv"):
        text = (SAMPLE / name).read_text()
        assert '"' not in text  # no quoted comma for the rewrite below to break
        (spaced / "case" / name).write_text(text.replace(",", ", ").replace("\n", " \n"))
    results = [ingest_case(root / "case", root / "case.duckdb") for root in (plain, spaced)]
    assert results[1].rows_quarantined == results[0].rows_quarantined == 0
    con = duckdb.connect(str(plain / "case.duckdb"), read_only=True)
    try:
        con.execute(f"ATTACH '{spaced / 'case.duckdb'}' AS spaced (READ_ONLY)")
        for table, rows in (("nodes", 4), ("accounts", 10)):
            for a, b in ((table, f"spaced.{table}"), (f"spaced.{table}", table)):
                got = con.execute(f"SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}").fetchall()
                assert got == [], (a, b)
            assert con.execute(f"SELECT count(*) FROM spaced.{table}").fetchall() == [(rows,)]
    finally:
        con.close()


def test_a_ledger_csv_op_with_blanks_is_quarantined_saying_so_and_a_source_is_trimmed(tmp_path):
    """A KV ledger's op is taken as it is (an external ledger's ops are read from its parts
    untrimmed), so ` write` is quarantined, its reason naming the op to write; a write's
    source ` decode` is checked as it is kept, trimmed."""
    case = _case(tmp_path)
    for part in (case / "kv_events").glob("*.parquet"):
        part.unlink()
    fields = ["ts", "node", "request_id", "op", "slot_start", "slot_count", "pos_start", "source"]
    rows = [
        ["2026-08-27T00:00:00Z", "decode-0", "req-000001", "alloc", "0", "16", "", ""],
        ["2026-08-27T00:00:01Z", "decode-0", "req-000001", "write", "0", "16", "0", " decode "],
        ["2026-08-27T00:00:02Z", "decode-0", "req-000001", " write", "0", "16", "0", "decode"],
        ["2026-08-27T00:00:03Z", "decode-0", "req-000001", "read", "0", "16", "0", " "],
    ]
    with (case / "kv_events" / "decode-0.csv").open("w", newline="") as f:
        csv.writer(f).writerows([fields, *rows])
    db = tmp_path / "case.duckdb"
    result = ingest_case(case, db)
    assert result.rows_quarantined == 1
    con = duckdb.connect(str(db), read_only=True)
    try:
        kept = con.execute("SELECT op, source FROM kv_events ORDER BY ts").fetchall()
        quarantined = con.execute(
            'SELECT "row", "column", "value", reason FROM quarantine'
        ).fetchall()
    finally:
        con.close()
    assert kept == [("alloc", None), ("write", "decode"), ("read", None)]
    assert quarantined == [
        (
            3,
            "op",
            " write",
            "op must be one of free, alloc, share, write, read: this one is write with blanks "
            "around it, remove them",
        )
    ]


def test_the_sample_has_no_column_outside_the_contract(tmp_path) -> None:
    db = tmp_path / "case.duckdb"
    result = ingest_case(_case(tmp_path), db)
    assert _warnings(db) == []
    assert result.notes == []


def test_a_jsonl_key_in_one_line_only_is_warned_of_once(tmp_path) -> None:
    case = _case(tmp_path)
    lines = (case / "contents.jsonl").read_text().splitlines()
    doc = json.loads(lines[5])
    doc["prompt_token_id"] = doc.pop("prompt_token_ids")
    lines[5] = json.dumps(doc)
    (case / "contents.jsonl").write_text("\n".join(lines) + "\n")
    db = tmp_path / "case.duckdb"
    ingest_case(case, db)
    # the first (and only) file holding the key has every contract column on its other lines
    assert _warnings(db) == [
        (
            "contents",
            "contents.jsonl",
            None,
            "prompt_token_id",
            None,
            "column 'prompt_token_id' is not one of the contents table's columns and was not "
            "loaded; if it holds one of the table's columns, rename it to that column's name",
        )
    ]


def _parquet_parts_with(
    case: Path, change: Callable[[pa.Table], pa.Table], parts: int
) -> list[str]:
    """Each node's ledger part cut into `parts` parts, each changed by `change`."""
    names = []
    for part in sorted((case / "kv_events").glob("*.parquet")):
        table = change(pq.read_table(part))
        part.unlink()
        step = -(-table.num_rows // parts)
        for i in range(parts):
            name = part.name.replace("-part-00001", f"-part-{i:05d}")
            pq.write_table(table.slice(i * step, step), part.parent / name)
            names.append(f"kv_events/{name}")
    return sorted(names)


def _added(table: pa.Table) -> pa.Table:
    return table.append_column("block_hash", pa.array(["v"] * table.num_rows))


def _renamed(table: pa.Table) -> pa.Table:
    return table.rename_columns(
        ["contenthash" if c == "content_hash" else c for c in table.column_names]
    )


def test_small_parquet_parts_loaded_together_warn_once_naming_the_first(tmp_path) -> None:
    case = _case(tmp_path)
    names = _parquet_parts_with(case, _added, 3)
    db = tmp_path / "case.duckdb"
    ingest_case(case, db)
    assert _warnings(db) == [
        (
            "kv_events",
            names[0],
            None,
            "block_hash",
            None,
            f"column 'block_hash' is not one of the kv_events table's columns and was not "
            f"loaded (in {len(names)} files, the first named here); if it holds one of the "
            "table's columns, rename it to that column's name",
        )
    ]
    events = sum(pq.ParquetFile(case / n).metadata.num_rows for n in names)
    assert _count(db, "SELECT count(*) FROM kv_events") == events


def _hive(case: Path) -> None:
    for part in sorted((case / "kv_events").glob("*.parquet")):
        node = part.name.split("-part-")[0]
        folder = case / "kv_events" / f"node={node}"
        folder.mkdir(exist_ok=True)
        part.rename(folder / part.name)


def test_an_external_ledger_warns_as_the_loaded_one(tmp_path) -> None:
    case = _case(tmp_path)
    names = _parquet_parts_with(case, _renamed, 2)
    loaded = tmp_path / "loaded.duckdb"
    ingest_case(case, loaded)
    _hive(case)
    external = tmp_path / "external.duckdb"
    result = ingest_case(case, external, ledger=ExternalLedger("kv_events"))
    reason = (
        f"column 'contenthash' is not one of the kv_events table's columns and was not loaded "
        f"(in {len(names)} files, the first named here); did you mean 'content_hash'? Rename "
        "the column"
    )
    first = names[0].replace("kv_events/", "kv_events/node=decode-0/")
    assert _warnings(external) == [("kv_events", first, None, "contenthash", None, reason)]
    assert _warnings(loaded) == [("kv_events", names[0], None, "contenthash", None, reason)]
    assert result.notes == [reason]


def test_the_warning_reaches_the_report_notes(tmp_path) -> None:
    case = _case(tmp_path)
    _rename_csv_column(case / "accounts.csv", "jurisdiction", "jurisdicton")
    db = tmp_path / "case.duckdb"
    ingest_case(case, db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert input_notes(con) == [
            "column 'jurisdicton' is not one of the accounts table's columns and was not "
            "loaded; did you mean 'jurisdiction'? Rename the column"
        ]
    finally:
        con.close()


def test_ingest_prints_each_warning(tmp_path) -> None:
    from typer.testing import CliRunner

    case = _case(tmp_path)
    _rename_csv_column(case / "nodes.csv", "pool_slots", "pool_size")
    out = CliRunner().invoke(app, ["ingest", str(case), "--db", str(tmp_path / "c.duckdb")])
    assert out.exit_code == 0, out.output
    assert "warning: column 'pool_size' is not one of the nodes table's columns" in out.output


def test_a_control_character_in_a_missing_column_error_is_shown_as_an_escape(tmp_path, cli) -> None:
    """The error that lists the columns a file has (one named by a hostile export with a
    terminal escape in it) prints the escape as text, never the raw control character."""
    case = _case(tmp_path)
    _rename_csv_column(case / "requests.csv", "request_id", "\x1b[31mrequest")
    code, out, err = cli("ingest", case, "--db", tmp_path / "c.duckdb")
    assert code != 0, err
    assert "columns found: \\u001b[31mrequest, account_id" in " ".join(err.split())
    assert "\x1b" not in out + err


def _add_csv_columns(path: Path, names: list[str]) -> None:
    rows = list(csv.reader(path.open(newline="")))
    rows[0].extend(names)
    for row in rows[1:]:
        row.extend("x" for _ in names)
    with path.open("w", newline="") as out:
        csv.writer(out).writerows(rows)


def test_many_unknown_columns_of_a_table_share_one_note_and_keep_a_warning_each(
    tmp_path,
) -> None:
    """A gateway export with ten fields the contract does not use, and one mis-named field:
    one warning each in ingest_warnings; in the notes the mis-named one on its own line, the
    ten on one line naming the first eight."""
    case = _case(tmp_path)
    extra = [f"field_{i:02d}" for i in range(10)]
    _add_csv_columns(case / "requests.csv", extra)
    _rename_csv_column(case / "accounts.csv", "contact_email", "contact_mail")
    db = tmp_path / "case.duckdb"
    result = ingest_case(case, db)
    assert [r[3] for r in _warnings(db)] == ["contact_mail", *extra]
    assert result.warnings == 11
    assert result.notes == [
        "column 'contact_mail' is not one of the accounts table's columns and was not loaded; "
        "did you mean 'contact_email'? Rename the column",
        "10 columns are not among the requests table's columns and were not loaded: "
        "'field_00', 'field_01', 'field_02', 'field_03', 'field_04', 'field_05', 'field_06', "
        "'field_07' and 2 more (one warning each in ingest_warnings)",
    ]


def test_three_unknown_columns_of_a_table_have_a_note_each(tmp_path) -> None:
    case = _case(tmp_path)
    _add_csv_columns(case / "nodes.csv", ["rack", "region", "zone"])
    result = ingest_case(case, tmp_path / "case.duckdb")
    assert [n.split("'")[1] for n in result.notes] == ["rack", "region", "zone"]


def test_what_the_tap_and_the_simulator_write_is_the_contract_and_no_more() -> None:
    """A ledger recorded by the tap, or simulated, is ingested without column warnings: their
    files hold the contract's columns and no others."""
    from forensics.case.contract import CONTENTS, KV_EVENTS
    from forensics.tap import writer

    assert writer.EVENTS.names == KV_EVENTS.names
    assert writer.CONTENTS.names == CONTENTS.names
    assert pq.read_schema(next((SAMPLE / "kv_events").glob("*.parquet"))).names == KV_EVENTS.names


def test_a_very_long_column_name_is_cut_in_the_message_and_kept_whole_in_the_table(
    tmp_path,
) -> None:
    case = _case(tmp_path)
    name = "x" * 5000
    _add_csv_columns(case / "accounts.csv", [name])
    db = tmp_path / "case.duckdb"
    result = ingest_case(case, db)
    ((*_, column, _, reason),) = _warnings(db)
    assert column == name
    assert reason.startswith("column '" + "x" * 120 + "…' is not one of the accounts table's")
    assert result.notes == [reason]


def test_an_external_part_with_columns_differing_only_in_case_is_refused(tmp_path) -> None:
    """'Request_ID' before 'request_id': DuckDB binds request_id to the first, so the part's
    events would carry the other column's values as their request ids. Refused, naming both."""
    case = _case(tmp_path)

    def twin(table: pa.Table) -> pa.Table:
        wrong = pa.array(["someone-else"] * table.num_rows)
        return pa.table([wrong, *table.columns], names=["Request_ID", *table.column_names])

    _parquet_parts_with(case, twin, 1)
    _hive(case)
    db = tmp_path / "external.duckdb"
    with pytest.raises(InputError) as refused:
        ingest_case(case, db, ledger=ExternalLedger("kv_events"))
    text = str(refused.value)
    assert "the columns 'Request_ID' and 'request_id' differ only in case" in text
    assert "kv_events/node=" in text
    assert not db.exists()
