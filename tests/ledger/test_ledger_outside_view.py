"""A case whose ledger is kept outside its database: the file's own kv_events is a view that
says where the ledger is when read without kvforensics (the DuckDB CLI, a notebook, DuckDB 1.1),
never an empty table that reads as a case without events; kvforensics reads the parts through
its own view; ingesting the case loaded again makes it the table, filled."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import duckdb
import pytest
from support.samples import hive_sample

from forensics.cli import run
from forensics.db import connect

OUTSIDE = "kv_events of this case is not in this file"


def _plain(db: Path, query: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)  # no kvforensics view
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _through_kvforensics(db: Path) -> int:
    con = connect(db, read_only=True)
    try:
        return int(con.execute("SELECT count(*) FROM kv_events").fetchall()[0][0])
    finally:
        con.close()


def _kind(db: Path) -> list[tuple]:
    return _plain(
        db,
        "SELECT table_type FROM information_schema.tables "
        "WHERE table_schema = 'main' AND table_name = 'kv_events'",
    )


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """The hive sample ingested in place and loaded: (case, external db, loaded events)."""
    root = tmp_path_factory.mktemp("outside")
    case = hive_sample(root)
    loaded, external = root / "loaded.duckdb", root / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(loaded), "--ledger-load"]) == 0
    assert run(["ingest", str(case), "--db", str(external), "--ledger-external"]) == 0
    events = _plain(loaded, "SELECT count(*) FROM kv_events")[0][0]
    assert events > 100_000
    return case, external, events


def test_read_without_kvforensics_it_says_where_the_ledger_is(cases) -> None:
    case, external, events = cases
    assert _kind(external) == [("VIEW",)]
    with pytest.raises(duckdb.Error) as raised:
        _plain(external, "SELECT count(*) FROM kv_events")
    said = str(raised.value)
    assert OUTSIDE in said and str(case / "kv_events") in said and "ledger_files" in said
    assert _plain(external, "SELECT count(*) FROM ledger_files") == [(4,)]
    assert _through_kvforensics(external) == events


def test_the_analysis_and_the_report_read_it_as_before(cases, tmp_path: Path) -> None:
    _, external, _ = cases
    db = tmp_path / "case.duckdb"
    db.write_bytes(external.read_bytes())
    assert run(["analyze", "--db", str(db)]) == 1  # the sample's findings
    assert run(["report", "--db", str(db), "--out", str(tmp_path / "out")]) in (0, 1)
    html = (tmp_path / "out" / "report.html").read_text()
    assert "ingest stage has not run" not in html
    assert not re.search(r"missing: [^)]*\bkv_events\b", html)  # the view is the table
    assert _kind(db) == [("VIEW",)]


def test_ingested_again_loaded_it_is_the_table_and_external_again_the_view(
    cases, tmp_path: Path
) -> None:
    case, external, events = cases
    db = tmp_path / "case.duckdb"
    db.write_bytes(external.read_bytes())
    assert run(["ingest", str(case), "--db", str(db), "--ledger-load"]) == 0
    assert _kind(db) == [("BASE TABLE",)]
    assert _plain(db, "SELECT count(*) FROM kv_events") == [(events,)]
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0
    assert _kind(db) == [("VIEW",)]
    assert _through_kvforensics(db) == events


def test_duckdb_1_1_reads_the_case_and_is_told_where_the_ledger_is(
    cases,
    old_python: Path,  # noqa: F811
) -> None:
    _, external, _ = cases
    script = (
        "import sys, duckdb\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "print(con.execute('SELECT count(*) FROM requests').fetchone()[0])\n"
        "try:\n"
        "    con.execute('SELECT count(*) FROM kv_events').fetchall()\n"
        "except duckdb.Error as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [str(old_python), "-c", script, str(external)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    requests, said = done.stdout.split("\n", 1)
    assert int(requests) > 0 and OUTSIDE in said
