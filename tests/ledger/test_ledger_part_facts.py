"""What ingest records of an external ledger's parts (ledger_files: each part's kept rows, their
seq, slot end, keys, reads, allocations and times), against the same figures computed here with
plain SQL from the loaded ledger of the same case; and the analysis, which takes its node list
from those records instead of a pass over the parts, gives the loaded ledger's tables, as it
does for a case ingested before they were recorded."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from support.cases import query
from support.ledgercases import LOADED, RECORDED
from support.samples import differences, edit_part, hive_sample, task_per_partition

from forensics.analysis import order
from forensics.cli import run

# Per part, from the loaded ledger's kv_events: the oracle.


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The hive sample with rows that are quarantined (one with seq and one without), kept rows
    without seq, and two requests left out of the request log (their rows kept, and warned
    of); ingested loaded and external, the loaded one analysed."""
    root = tmp_path_factory.mktemp("facts")
    case = hive_sample(root)
    decode1 = next((case / "kv_events" / "node=decode-1").glob("*.parquet"))
    edit_part(decode1, 4, "slot_count", 0)
    edit_part(decode1, 7, "seq", None)
    edit_part(decode1, 9, "seq", None)
    edit_part(decode1, 9, "slot_count", 0)
    decode0 = next((case / "kv_events" / "node=decode-0").glob("*.parquet"))
    edit_part(decode0, 0, "slot_start", -3)  # the part's first row: its smallest key goes
    lines = (case / "requests.csv").read_text().splitlines(keepends=True)
    (case / "requests.csv").write_text("".join(lines[:1] + lines[3:]))
    loaded, external = root / "loaded.duckdb", root / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(loaded), "--ledger-load"]) == 1
    assert run(["analyze", "--db", str(loaded)]) == 1
    assert run(["ingest", str(case), "--db", str(external), "--ledger-external"]) == 1
    return case, loaded, external


def test_each_parts_kept_rows_are_recorded_as_the_loaded_ledger_holds_them(cases) -> None:
    _case, loaded, external = cases
    expected = query(loaded, LOADED)
    assert len(expected) == 4
    assert query(external, RECORDED) == expected
    quarantined = query(external, "SELECT count(*) FROM quarantine WHERE table_name = 'kv_events'")
    assert quarantined == [(3,)]


def test_the_analysis_lists_the_nodes_from_the_records(cases, tmp_path, monkeypatch) -> None:
    _case, loaded, external = cases
    db = tmp_path / "external.duckdb"
    db.write_bytes(external.read_bytes())
    listed = _spy(monkeypatch)
    task_per_partition(monkeypatch)
    assert run(["analyze", "--db", str(db)]) == 1
    assert sorted(listed) == [True] * 4  # every partition, without a pass of its own
    assert differences(loaded, db) == {}


def test_a_case_ingested_before_the_records_is_analysed_with_a_pass(
    cases, tmp_path, monkeypatch
) -> None:
    _case, loaded, external = cases
    db = tmp_path / "older.duckdb"
    db.write_bytes(external.read_bytes())
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE OR REPLACE TABLE ledger_files AS SELECT url, rel, node, rank FROM ledger_files"
    )
    con.close()
    listed = _spy(monkeypatch)
    task_per_partition(monkeypatch)
    assert run(["analyze", "--db", str(db)]) == 1
    assert sorted(listed) == [False] * 4
    assert differences(loaded, db) == {}


def _spy(monkeypatch) -> list[bool]:
    """Whether each partition task's node list came from the records (counted)."""
    listed: list[bool] = []
    real = order.node_list

    def node_list(con, counted=False):
        listed.append(counted)
        return real(con, counted)

    monkeypatch.setattr(order, "node_list", node_list)
    return listed
