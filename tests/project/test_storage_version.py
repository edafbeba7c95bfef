"""The storage format of a new case database: DuckDB 1.1's unless KVFORENSICS_STORAGE_VERSION
asks for a newer one, which an existing database never takes on.

The format is told apart by how DuckDB stores a column of repeated text: the 1.1 format has
plain dictionary compression ('Dictionary') or FSST on its own ('FSST'), chosen segment by
segment, the 1.3 format dictionary plus FSST in one scheme ('DICT_FSST') that older releases
cannot read."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from forensics.casedb.dbopen import STORAGE_COMPATIBILITY, open_database
from forensics.cli import run
from forensics.errors import UsageError

# Enough rows of a few repeated values for DuckDB to compress full segments of the column.
FILL = "CREATE TABLE probe AS SELECT 'decode-' || (i % 4) AS node FROM range(300000) r(i)"
APPEND = "INSERT INTO probe SELECT 'prefill-' || (i % 3) FROM range(300000) r(i)"
COMPRESSION = (
    "SELECT DISTINCT compression FROM pragma_storage_info('probe') "
    "WHERE column_name = 'node' AND segment_type = 'VARCHAR'"
)
# What the 1.1 format may choose for a text segment; which one a segment gets depends on how
# the rows fell into segments, so the tests ask only that every segment is one of these.
V1_1_TEXT = {"Dictionary", "FSST", "Uncompressed", "Constant"}


def _compressions(path: Path, statement: str) -> set[str]:
    con = open_database(path)
    try:
        con.execute(statement)
        con.execute("CHECKPOINT")
        return {row[0] for row in con.execute(COMPRESSION).fetchall()}
    finally:
        con.close()


def test_default_is_the_duckdb_1_1_format(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("KVFORENSICS_STORAGE_VERSION", raising=False)
    assert STORAGE_COMPATIBILITY == "v1.1.0"
    found = _compressions(tmp_path / "case.duckdb", FILL)
    assert found and found <= V1_1_TEXT


@pytest.mark.parametrize("version", ["v1.3.0", "latest"])
def test_a_newer_format_on_request(tmp_path: Path, monkeypatch, version: str) -> None:
    monkeypatch.setenv("KVFORENSICS_STORAGE_VERSION", version)
    assert "DICT_FSST" in _compressions(tmp_path / "case.duckdb", FILL)


def test_an_existing_database_keeps_its_format(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "case.duckdb"
    monkeypatch.delenv("KVFORENSICS_STORAGE_VERSION", raising=False)
    first = _compressions(path, FILL)
    assert first and first <= V1_1_TEXT
    monkeypatch.setenv("KVFORENSICS_STORAGE_VERSION", "latest")
    after = _compressions(path, APPEND)
    assert after and after <= V1_1_TEXT
    # ... so a responder's DuckDB 1.1 still opens it; and the file is whole in the installed one
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM probe").fetchone() == (600000,)
    con.close()


def test_an_unknown_format_is_a_usage_error(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KVFORENSICS_STORAGE_VERSION", "v0.9")
    with pytest.raises(UsageError, match="KVFORENSICS_STORAGE_VERSION.*v1.1.0"):
        open_database(tmp_path / "case.duckdb")
    assert not (tmp_path / "case.duckdb").exists()
    case = tmp_path / "case"
    case.mkdir()
    (case / "requests.csv").write_text("request_id,account_id,ts\nr1,a1,2026-01-01T00:00:00Z\n")
    code = run(["ingest", str(case), "--db", str(tmp_path / "other.duckdb")])
    assert code == 2
    assert "KVFORENSICS_STORAGE_VERSION" in capsys.readouterr().err
