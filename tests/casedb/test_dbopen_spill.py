"""Where an in-memory connection (an external partition's task, the ledger's checks) spills
when its work outgrows its memory limit: a folder of its own in the system's temporary folder,
gone when the connection closes; never .tmp in the working directory."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from forensics.casedb.dbopen import open_database, remove_stale_spills


def test_a_spill_goes_to_the_system_temporary_folder_and_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, system = tmp_path / "work", tmp_path / "system"
    work.mkdir()
    system.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(system))
    con = open_database(":memory:", memory_limit="64MB", schema=False)
    con.execute("SET threads = 1")
    con.execute(
        "CREATE TEMP TABLE t AS SELECT range AS r, md5(range::VARCHAR) AS h FROM range(3000000)"
    )
    assert con.execute("SELECT count(DISTINCT h) FROM t").fetchone() == (3_000_000,)
    folders = list(system.iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("kvforensics-spill-")
    assert any(folders[0].iterdir())  # it did spill, there
    con.close()
    assert list(system.iterdir()) == []
    assert list(work.iterdir()) == []  # no .tmp where it ran


def test_two_connections_spill_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    a = open_database(":memory:", schema=False)
    b = open_database(":memory:", schema=False)
    where = [c.execute("SELECT current_setting('temp_directory')").fetchone()[0] for c in (a, b)]
    assert where[0] != where[1]
    assert all(Path(w).parent == tmp_path for w in where)
    a.close()
    b.close()


def test_a_connection_for_a_case_database_spills_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = tmp_path / "system"
    system.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system))
    db = tmp_path / "cases" / "case.duckdb"
    db.parent.mkdir()
    con = open_database(":memory:", memory_limit="64MB", schema=False, spill_beside=db)
    con.execute("SET threads = 1")
    con.execute(
        "CREATE TEMP TABLE t AS SELECT range AS r, md5(range::VARCHAR) AS h FROM range(3000000)"
    )
    assert con.execute("SELECT count(DISTINCT h) FROM t").fetchone() == (3_000_000,)
    spills = [p for p in db.parent.iterdir() if p.name.startswith("case.duckdb.kvforensics-spill-")]
    assert len(spills) == 1 and any(spills[0].iterdir())
    con.close()
    assert list(db.parent.iterdir()) == []
    assert list(system.iterdir()) == []


def test_ingest_checks_and_partition_tasks_here_spill_beside_the_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run here, the external ledger's checks and partition tasks work for the case database on
    this machine: they spill beside it (the system's temporary folder may be memory)."""
    from support.samples import hive_sample

    import forensics.casedb.scratch as scratch
    from forensics.cli import run

    opened: list[Path | None] = []
    real = scratch.open_database

    def recorded(path, **kw):  # type: ignore[no-untyped-def]
        if str(path) == ":memory:":
            opened.append(kw.get("spill_beside"))
        return real(path, **kw)

    # the checks' and the partition tasks' databases (one per thread that runs them)
    monkeypatch.setattr(scratch, "open_database", recorded)
    case, db = hive_sample(tmp_path), tmp_path / "out" / "case.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0
    checks = len(opened)
    assert run(["analyze", "--db", str(db)]) == 1
    assert checks >= 1 and len(opened) > checks  # the checks', then the tasks'
    assert set(opened) == {db}


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_runs_spill_folders_are_removed_when_the_database_is_next_opened(
    tmp_path: Path,
) -> None:
    """Spill folders of a process that no longer runs go when a run next opens the database
    for writing; a live process's, a link, a file, another database's and look-alikes stay."""
    db = tmp_path / "case.duckdb"
    open_database(db).close()
    dead, live = _dead_pid(), os.getpid()
    stale = tmp_path / f"case.duckdb.kvforensics-spill-{dead}-0badf00d"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "duckdb_temp_block-1.block").write_bytes(b"x" * 100)
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    (evidence / "keep.txt").write_text("keep")
    kept = [
        tmp_path / f"case.duckdb.kvforensics-spill-{live}-0badf00d",  # a live run's
        tmp_path / f"other.duckdb.kvforensics-spill-{dead}-0badf00d",  # another database's
        tmp_path / f"case.duckdb.kvforensics-spill-{dead}-0badf00d-x",  # not the name
        tmp_path / f"case.duckdb.kvforensics-spill-{dead}",
    ]
    for folder in kept:
        folder.mkdir()
    link = tmp_path / f"case.duckdb.kvforensics-spill-{dead}-1badf00d"
    link.symlink_to(evidence)
    plain = tmp_path / f"case.duckdb.kvforensics-spill-{dead}-2badf00d"
    plain.write_text("a file of that name")

    open_database(db, read_only=True).close()  # a reader removes nothing
    assert stale.exists()
    open_database(db).close()
    assert not stale.exists()
    assert all(f.is_dir() for f in kept)
    assert link.is_symlink() and (evidence / "keep.txt").read_text() == "keep"
    assert plain.read_text() == "a file of that name"
    assert remove_stale_spills(db) == []
