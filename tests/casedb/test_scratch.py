"""The in-memory databases a pool's threads keep for the tasks they run one after another
(forensics.casedb.scratch): a thread opens one, and each task starts from nothing in it."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from support.cases import query
from support.samples import differences

import forensics.casedb.scratch
from forensics.casedb.scratch import ScratchDatabases, scratch_connection
from forensics.cli import run as kvf

# The catalogs a connection sees besides DuckDB's own (system, temp).
CATALOGS = (
    "SELECT database_name FROM duckdb_databases() "
    "WHERE database_name NOT IN ('system', 'temp') ORDER BY ALL"
)


QUARANTINE_ROW = "INSERT INTO quarantine VALUES ('kv_events', 'x', 1, NULL, NULL, 'why')"


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """The databases forensics.casedb.scratch opens, by the thread that opened each."""
    names: list[str] = []
    real = forensics.casedb.scratch.open_database

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        names.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(forensics.casedb.scratch, "open_database", counted)
    return names


def test_a_task_sees_nothing_of_the_task_before_it_on_its_thread(opened) -> None:
    pool = ScratchDatabases("1GB")
    try:
        with pool.connection() as first:
            first.execute(QUARANTINE_ROW)
            first.execute("CREATE SCHEMA work; CREATE TABLE work.codes AS SELECT 1 AS code")
            first.execute("CREATE TEMP TABLE mine AS SELECT 1 AS a")
            first.execute("SET VARIABLE mine = 7")
            first.register("_rows", pa.table({"a": [1]}))
            assert first.execute("SELECT count(*) FROM quarantine").fetchall() == [(1,)]
        with pool.connection() as second:
            # the input tables anew and empty, the settings and macros of every connection
            assert second.execute("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
            assert second.execute("SELECT current_setting('TimeZone')").fetchall() == [("UTC",)]
            assert second.execute("SELECT kvf_str('  a ')").fetchall() == [("a",)]
            assert second.execute("SELECT getvariable('mine')").fetchall() == [(None,)]
            for gone in ("work.codes", "mine", "_rows"):
                with pytest.raises(duckdb.CatalogException):
                    second.execute(f"SELECT * FROM {gone}")
            # the first task's catalog is detached: only the thread's own and this task's
            (own, mine) = second.execute(CATALOGS).fetchall()
            assert own == ("memory",) and mine[0].startswith("task_")
    finally:
        pool.close()
    assert opened == [threading.current_thread().name]  # one database for both tasks


def test_a_failed_task_leaves_nothing_behind(opened) -> None:
    pool = ScratchDatabases()
    try:
        with pytest.raises(RuntimeError), pool.connection() as con:
            con.execute("CREATE TABLE left_over AS SELECT 1 AS a")
            raise RuntimeError("the task failed")
        with pool.connection(schema=False) as con:
            assert len(con.execute(CATALOGS).fetchall()) == 2  # memory and this task's
            with pytest.raises(duckdb.CatalogException):
                con.execute("SELECT * FROM left_over")
            with pytest.raises(duckdb.CatalogException):
                con.execute("SELECT * FROM quarantine")  # schema=False: no input tables
    finally:
        pool.close()
    assert len(opened) == 1


def test_each_thread_has_its_own_database_and_close_closes_them(opened) -> None:
    pool = ScratchDatabases()
    held: list[duckdb.DuckDBPyConnection] = []
    both = threading.Barrier(2)

    def task() -> None:
        with pool.connection() as con:
            both.wait(10)  # the two tasks at once, each in its thread's database
            con.execute(QUARANTINE_ROW)
            assert con.execute("SELECT count(*) FROM quarantine").fetchall() == [(1,)]
        held.append(pool._mine.db)

    threads = [threading.Thread(target=task) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 2 and len(set(opened)) == 2
    assert held[0] is not held[1]
    pool.close()
    for db in held:
        with pytest.raises(duckdb.ConnectionException):
            db.execute("SELECT 1")


def test_without_a_pool_a_task_opens_and_closes_its_own(opened) -> None:
    with scratch_connection(None, "1GB") as con:
        assert con.execute("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
    with pytest.raises(duckdb.ConnectionException):
        con.execute("SELECT 1")
    assert len(opened) == 1


def test_partition_tasks_on_one_thread_give_the_loaded_ledgers_tables(
    spoiled,  # noqa: F811
    tmp_path: Path,
    opened,
) -> None:
    """The sample's four partitions (five parts) swept by one thread in its one database, one
    of them with a quarantined row that the others must not see: the loaded ledger's tables."""
    case, loaded = spoiled
    db = tmp_path / "external.duckdb"
    assert kvf(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 1
    checks = len(opened)
    assert 1 <= checks <= 2  # the checks' threads, however many partitions
    assert kvf(["analyze", "--db", str(db), "--workers", "1"]) == 1
    assert len(opened) == checks + 1
    assert query(db, "SELECT count(*) FROM exposures") == [(46,)]  # the sample's ground truth
    assert differences(loaded, db) == {}
