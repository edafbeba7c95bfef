"""Where the ledger lives when the command does not say: a Parquet ledger in node=NAME/ folders
is read in place by default (--ledger-load loads it), other ledgers load; both analyse alike,
the manifest says where the ledger lives and verify passes for both."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from support.paths import SAMPLE
from support.samples import hive_sample

from forensics.cli import run
from forensics.ledger.default import in_place_by_default

EXPOSURES = "SELECT * EXCLUDE (leaker_part) FROM exposures ORDER BY ALL"


def _kept_outside(db: Path) -> bool:
    con = duckdb.connect(str(db), read_only=True)
    try:
        found = con.execute("SELECT count(*) FROM case_meta WHERE key = 'ledger_external'")
        return bool(found.fetchall()[0][0])
    finally:
        con.close()


def _rows(db: Path, text: str) -> list[tuple]:
    from forensics.db import connect

    con = connect(db, read_only=True)  # the project's connection: the ledger's view attached
    try:
        return con.execute(text).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def hive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hive_sample(tmp_path_factory.mktemp("default"))


def test_a_parquet_ledger_in_node_folders_is_read_in_place(hive: Path, tmp_path: Path) -> None:
    default, loaded = tmp_path / "default.duckdb", tmp_path / "loaded.duckdb"
    assert run(["ingest", str(hive), "--db", str(default)]) == 0
    assert run(["ingest", str(hive), "--db", str(loaded), "--ledger-load"]) == 0
    assert _kept_outside(default) and not _kept_outside(loaded)
    for db in (default, loaded):
        assert run(["analyze", "--db", str(db)]) == 1
    assert _rows(default, EXPOSURES) == _rows(loaded, EXPOSURES) != []
    assert default.stat().st_size < loaded.stat().st_size  # no copy of the ledger inside


def test_other_ledgers_load(tmp_path: Path) -> None:
    assert not in_place_by_default(SAMPLE)  # flat Parquet parts: no node=NAME folders
    db = tmp_path / "flat.duckdb"
    assert run(["ingest", str(SAMPLE), "--db", str(db)]) in (0, 1)
    assert not _kept_outside(db)
    mixed = tmp_path / "mixed"
    shutil.copytree(SAMPLE, mixed)
    (mixed / "kv_events" / "node=x").mkdir()
    (mixed / "kv_events" / "node=x" / "more.csv").write_text("ts,node\n")
    assert not in_place_by_default(mixed)  # anything but Parquet in node folders: load all
    assert run(["ingest", str(hive_sample(tmp_path)), "--db", str(db), "--ledger-load",
                "--ledger-external"]) == 2  # fmt: skip


def test_the_manifest_says_where_the_ledger_lives(hive: Path, tmp_path: Path) -> None:
    for extra, kept in (([], "in place, outside the case database"), (["--ledger-load"], None)):
        out = tmp_path / ("loaded" if extra else "default")
        assert run(["investigate", str(hive), "--out", str(out), *extra]) == 1
        storage = json.loads((out / "manifest.json").read_text())["ledger_storage"]
        if kept:
            assert storage["kept"] == kept
            assert storage["location"] == str((hive / "kv_events").resolve())
        else:
            assert storage == {"kept": "in the case database", "location": None}
        assert run(["verify", str(out)]) == 0
